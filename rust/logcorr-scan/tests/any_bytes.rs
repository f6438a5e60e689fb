//! Property tests of the scanner over generated log sets: files of bytes built from real line
//! shapes (SGLang prefixes of several versions, NCCL, torch `[rankN]:[E…]`, glog, tracebacks,
//! faulthandler and py-spy dumps, C++ aborts) behind the wrappers logcorr peels (CRI, kubectl,
//! Docker json-file, compose, srun, Ray, torchrun, pdsh), real lines of the fixtures, and
//! hostile bytes (ANSI and OSC sequences, CR and CRLF, invalid UTF-8, NULs, gzip whole, in
//! members, cut or damaged, and gzip's magic before garbage).
//!
//! No input makes the scanner panic, and a set gives the same answers read in one chunk or cut
//! into chunks of any size (down to one line or one byte), on one thread or two: the parsed
//! parts, pass 1's survey, and pass 2's attribution and event rows. Every physical line comes
//! out once, its parts' texts making up the line.
//!
//! `PROPTEST_CASES=N cargo test --release -p logcorr-scan --test any_bytes` runs more cases
//! than the default (which keeps the test to a few seconds).

mod common;

use std::io::Write;
use std::path::Path;
use std::sync::LazyLock;

use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, RngSeed};

/// Lines as SGLang, NCCL, torch, glog and Python print them.
const SHAPES: &[&str] = &[
    "[2026-11-29 10:00:00 TP3] Decode batch, #running-req: 4, #token: 812, token usage: 0.03",
    "[2026-11-29 10:00:00.123 DP1 TP9 EP9] Prefill batch, #new-seq: 1, #new-token: 64",
    "[2024-08-01 10:00:00 TP0] Load weight begin. avail mem=78.65 GB",
    "[2025-07-25 07:53:01 PP1 TP3] Scheduler hit an exception: Traceback (most recent call last):",
    "[2026-11-29 10:00:00 ATTN_CP1 MOE_DP1 TP6 EP2] Pyspy dump for PID 3416048:",
    "[2026-11-29 10:00:00 DP4 TP9 EP9 PID3416069] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
    "[2026-11-29 10:00:00] server_args=ServerArgs(tp_size=16, dp_size=8, enable_dp_attention=True, nnodes=2, node_rank=1, ep_size=16)",
    "[2026-11-29 10:00:00] INFO:     127.0.0.1:53312 - \"POST /generate HTTP/1.1\" 200 OK",
    "[2026-11-29 10:00:00 TP0] Exception in ModelTpServer:",
    "gpu-node-0:3416006:3416006 [0] NCCL INFO comm 0x55d4a8c0 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0x6f1d9b1c2e3a4b5c - Init COMPLETE",
    "gpu-node-0:3416006:3416006 [0] NCCL INFO ncclCommInitRank comm 0x55d4a8c0 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId 18000 commId 0x6f1d9b1c2e3a4b5c - Init START",
    "gpu-node-1:3416069:3416101 [1] NCCL WARN socketStartConnect: Connect to 169.254.20.10<43369> failed : Software caused connection abort",
    "gpu-node-0:3416006:3416006 [0] NCCL INFO AllReduce: opCount 1a sendbuff 0x7f3a00000001 recvbuff 0x7f3b00000001 count 4096 datatype 7 op 0 root 0 comm 0x55d0c0a00000 [nranks=8] stream 0x55d0c1b20000",
    "gpu-node-0:3416006:3416050 [0] init.cc:1534 NCCL WARN x -> 2",
    "[rank3]:[E1129 10:00:01.000000000 ProcessGroupNCCL.cpp:632] [PG ID 2 PG GUID 3(tp:device) Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, OpType=ALLREDUCE, NumelIn=19008, NumelOut=19008, Timeout(ms)=600000) ran for 600071 milliseconds before timing out.",
    "[rank9]:[W1129 10:00:01.000 ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0 Rank 9]  using GPU 9 to perform barrier as devices used by this process are currently unknown.",
    "[rank7]:[E1129 10:00:02.000000000 ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID 3(tp:device) Rank 7] Exception (either an error or timeout) detected by watchdog at work: 9141, last enqueued NCCL work: 9141, last completed NCCL work: 9140.",
    "[rank0]: Traceback (most recent call last):",
    "I1129 10:00:01.000000 123 file.cc:12] glog info",
    "[F1129 10:00:01.000000 123 ProcessGroupNCCL.cpp:1400] fatal",
    "Traceback (most recent call last):",
    "  File \"/sgl/python/sglang/srt/managers/scheduler.py\", line 2501, in event_loop_overlap",
    "    self.run_batch()",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "During handling of the above exception, another exception occurred:",
    "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:2027",
    "Fatal Python error: Aborted",
    "Thread 0x00007f3b6d4e7700 (most recent call first):",
    "  File \"/sgl/python/sglang/srt/managers/scheduler.py\", line 1012 in event_loop_overlap",
    "Extension modules: numpy.core._multiarray_umath, torch._C (total: 80)",
    "Process 3416069: sglang::scheduler_DP4_TP9_EP9",
    "Python v3.12.3 (/usr/bin/python3.12)",
    "Thread 3416069 (idle): \"MainThread\"",
    "    all_reduce (torch/distributed/distributed_c10d.py:2501)",
    "terminate called after throwing an instance of 'c10::DistBackendError'",
    "  what():  [PG ID 2 PG GUID 3(tp:device) Rank 1] Process group watchdog thread terminated with exception: CUDA error",
    "Exception raised from c10_cuda_check_implementation at ../c10/cuda/CUDAException.cpp:43 (most recent call first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3b6d410000 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)",
    "[Gloo] Rank 3 is connected to 15 peer ranks. Expected number of connected peer ranks is : 15",
    "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.00s/it]",
    "./run.sh: line 24: 3557732 Killed                  python -m sglang.launch_server --tp 8",
    "",
    "  ",
];

/// What launchers, runtimes and collectors put before a line.
const WRAPPERS: &[&str] = &[
    "2026-11-29T02:00:00.123456789Z stderr F ",
    "2026-11-29T02:00:00.123456789Z stdout P ",
    "2026-11-29T02:00:00.123456789Z ",
    "[pod/sglang-0/sglang] ",
    "[pod/sglang-1/sglang] 2026-11-29T02:00:00.123456789Z ",
    "sglang-1  | ",
    "\u{1b}[2Ksglang-1  | ",
    "\u{1b}[2K\r\u{1b}[36msglang-2  | \u{1b}[0m",
    "17: ",
    "\u{1b}[1A\u{1b}[2K3: ",
    "(WorkerDict pid=859188) ",
    "(SchedulerDisaggregation pid=123, ip=10.0.0.2) ",
    "[default3]:",
    "2: [default0]:",
    "node0: ",
    "INFO 11-29 10:00:00 ",
    "\u{1b}[0m\u{1b}[36m",
];

/// Damage and odd bytes: invalid UTF-8, NULs, CR, colour, cursor and OSC sequences, a BOM, the
/// bell, a bidi control, the parts splitter's sentinel, glued stamps, ranks and records.
#[rustfmt::skip]
const PIECES: &[&[u8]] = &[
    b"\r", b"\x00", b"\x00\x00\x00", b"\t", b" ", b"x", b"\xff", b"\xc3", b"\xe2\x82",
    b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xef\xbb\xbf", b"\x1f\x8b", b"\x1b[31m", b"\x1b[0m",
    b"\x1b[2J\x1b[H", b"\x1b]8;;http://x\x1b\\", b"\x1b]52;c;aGk=\x07", b"\x07", b"\xe2\x80\xae",
    b"\xee\x80\x80", b"[2026-11-29 10:00:00] ", b"[2026-11-29 10:00:00.123 TP3] ", b"[20",
    b"[rank3]:", b"{\"log\":\"", b"\\n\",\"stream\":\"stderr\",\"time\":\"2026-11-29T02:00:00.1Z\"}",
    b"\\\"", b"\\u001b", b"Traceback (most recent call last):", b"Process 123: ",
    b"Pyspy dump for PID 123", b"sglang::scheduler_DP0_TP0", b"server_args=ServerArgs(tp_size=16, ",
    b"tp_size=", b"1e400", b"-8", b"99999999999999999999", b"[bold]", b"\\", b":", b"\"",
    b"9999-12-31 23:59:59", b"0001-01-01 00:00:00",
];

/// NCCL headers to glue into a line (`…before timinggpu-node-0:3416006:3416006 [0] NCCL INFO`).
const NCCL_PIECES: &[&[u8]] = &[b" NCCL ", b"gpu-node-0:3416006:3416006 [0] NCCL INFO "];

/// Line ends: mostly LF; a lone CR, or none, glues the line to the next.
const ENDS: &[&[u8]] = &[b"\n", b"\n", b"\n", b"\r\n", b"\r", b""];

/// Lines of the fixtures' logs (real shapes, as SGLang and torch printed them).
static REAL: LazyLock<Vec<Vec<u8>>> = LazyLock::new(|| {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut lines = std::collections::BTreeSet::new();
    for kind in ["analyze", "jobs"] {
        let Ok(cases) = std::fs::read_dir(root.join(kind)) else {
            continue;
        };
        for case in cases.flatten() {
            let Ok(files) = std::fs::read_dir(case.path().join("logs")) else {
                continue;
            };
            for file in files.flatten() {
                if let Ok(bytes) = std::fs::read(file.path()) {
                    if !bytes.starts_with(&[0x1f, 0x8b]) {
                        lines.extend(bytes.split(|&b| b == b'\n').map(<[u8]>::to_vec));
                    }
                }
            }
        }
    }
    lines.into_iter().collect()
});

/// What lines are made of. The parse reads the host of an NCCL header glued into a line, and
/// mends a host token another host ends, with the hosts of the NCCL lines of its chunk (a
/// statistic of the chunk, not of one line: see `common::hosts_alone`), so those lines are
/// left out of the sets read in chunks of any size (`hosts_alone`); the hostile mix has them.
#[derive(Clone, Copy)]
struct Mix {
    hosts_alone: bool,
}

impl Mix {
    fn pieces(self) -> Vec<&'static [u8]> {
        let mut pieces = PIECES.to_vec();
        if !self.hosts_alone {
            pieces.extend_from_slice(NCCL_PIECES);
        }
        pieces
    }

    /// (a lone CR, or no end, glues the next line to this one)
    fn ends(self) -> &'static [&'static [u8]] {
        if self.hosts_alone {
            &ENDS[..4]
        } else {
            ENDS
        }
    }

    fn real(self) -> Vec<Vec<u8>> {
        REAL.iter()
            .filter(|line| !self.hosts_alone || !common::glued_nccl(&String::from_utf8_lossy(line)))
            .cloned()
            .collect()
    }

    /// A line's text (without its end): a shape (behind a wrapper, in a Docker envelope,
    /// damaged), a real line, pieces, or any bytes.
    fn line(self) -> impl Strategy<Value = Vec<u8>> {
        let pieces = self.pieces();
        let shaped = (
            prop::option::weighted(0.4, prop::sample::select(WRAPPERS)),
            prop::sample::select(SHAPES),
            prop::collection::vec(
                (
                    any::<prop::sample::Index>(),
                    prop::sample::select(pieces.clone()),
                ),
                0..2,
            ),
            any::<bool>(),
        )
            .prop_map(move |(wrapper, shape, damage, json)| {
                let mut text = shape.as_bytes().to_vec();
                // (an NCCL header after anything is glued; a cut envelope leaves `{"log":"` before it)
                let alone = self.hosts_alone && shape.starts_with("gpu-node-");
                if !alone {
                    for (at, piece) in damage {
                        let at = at.index(text.len() + 1);
                        text.splice(at..at, piece.iter().copied());
                    }
                }
                let wrapper = wrapper.filter(|_| !alone);
                let mut out = wrapper.map_or_else(Vec::new, |w| w.as_bytes().to_vec());
                out.extend(text);
                if json && wrapper.is_none() && !alone {
                    out = docker(&out);
                }
                out
            });
        let real = prop::sample::select(self.real());
        let glued =
            prop::collection::vec(prop::sample::select(pieces), 0..6).prop_map(|p| p.concat());
        let bytes = prop::collection::vec(any::<u8>(), 0..24);
        prop_oneof![5 => shaped, 3 => real, 1 => glued, 1 => bytes]
    }

    /// A file's bytes: lines with their ends, then plain, or gzip (whole, two members, cut,
    /// a flipped byte), or gzip's magic before them.
    fn file(self) -> impl Strategy<Value = Vec<u8>> {
        let text = prop::collection::vec((self.line(), prop::sample::select(self.ends())), 0..40)
            .prop_map(|lines| {
                lines
                    .into_iter()
                    .flat_map(|(mut line, end)| {
                        line.extend_from_slice(end);
                        line
                    })
                    .collect::<Vec<u8>>()
            });
        (text, 0..12u8, any::<prop::sample::Index>()).prop_map(move |(text, how, at)| match how {
            0 => gzip(&text),
            1 => {
                let half = at.index(text.len() + 1);
                [gzip(&text[..half]), gzip(&text[half..])].concat()
            }
            2 => {
                let packed = gzip(&text);
                packed[..at.index(packed.len() + 1)].to_vec()
            }
            // (a flipped byte makes the rest of the stream decode into anything)
            3 if !self.hosts_alone => {
                let mut packed = gzip(&text);
                let i = at.index(packed.len());
                packed[i] ^= 0x55;
                packed
            }
            4 => [&[0x1f, 0x8b][..], &text].concat(),
            _ => text,
        })
    }
}

/// One line as a `{"log": …}` Docker json-file envelope.
fn docker(line: &[u8]) -> Vec<u8> {
    let mut out = b"{\"log\":\"".to_vec();
    for &b in line {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0..=0x1f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.extend_from_slice(b"\\n\",\"stream\":\"stderr\",\"time\":\"2026-11-29T02:00:00.1Z\"}");
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).expect("write");
    encoder.finish().expect("finish")
}

/// 32 cases from a fixed seed (the same cases every run); `PROPTEST_CASES` and
/// `PROPTEST_RNG_SEED` choose others.
fn config() -> ProptestConfig {
    let given = |name: &str| std::env::var_os(name).is_some();
    let defaults = ProptestConfig::default();
    ProptestConfig {
        cases: if given("PROPTEST_CASES") {
            defaults.cases
        } else {
            32
        },
        rng_seed: if given("PROPTEST_RNG_SEED") {
            defaults.rng_seed
        } else {
            RngSeed::Fixed(28)
        },
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource("regressions"))),
        ..defaults
    }
}

proptest! {
    #![proptest_config(config())]

    /// Hostile sets (glued NCCL headers too) are read without a panic, on one thread or two,
    /// every line once.
    #[test]
    fn no_set_makes_the_scanner_panic(
        contents in prop::collection::vec(Mix { hosts_alone: false }.file(), 1..4),
        chunk_bytes in prop_oneof![1usize..8, 8usize..400],
        max_rows in 1usize..12,
    ) {
        common::check(&contents, chunk_bytes, max_rows, false).map_err(TestCaseError::fail)?;
    }

    /// A set gives the same parts, survey, attribution and event rows in one chunk, in chunks
    /// of any size (down to a byte, or a line), and on two threads.
    #[test]
    fn a_set_reads_the_same_in_any_chunks_on_any_threads(
        contents in prop::collection::vec(Mix { hosts_alone: true }.file(), 1..4),
        chunk_bytes in prop_oneof![1usize..8, 8usize..400],
        max_rows in 1usize..12,
    ) {
        common::check(&contents, chunk_bytes, max_rows, true).map_err(TestCaseError::fail)?;
        // (the fuzz target's test of which sets those are agrees with the mix)
        let set = common::Set::write(&contents);
        let (parts, _) = common::parts(&set.files, common::WHOLE);
        prop_assert!(common::hosts_alone(&common::texts(&set.files, common::WHOLE), &[&parts]));
    }
}

/// Pass 2 takes from pass 1 every chunk it parsed and kept (a line is parsed once), and gives
/// the same attribution as parsing them again.
#[test]
fn pass_2_takes_the_chunks_pass_1_parsed() {
    let lines = Mix { hosts_alone: true }.real();
    let contents: Vec<Vec<u8>> = (0..3)
        .map(|i| {
            lines
                .iter()
                .cycle()
                .skip(i)
                .take(lines.len() * 4)
                .flat_map(|line| line.iter().copied().chain([b'\n']))
                .collect()
        })
        .collect();
    let set = common::Set::write(&contents);
    let kept = logcorr_scan::pipeline::Plan {
        chunk_bytes: 600,
        max_rows: 7,
        threads: 2,
        keep_parsed: usize::MAX / 2,
    };
    let again = logcorr_scan::pipeline::Plan {
        keep_parsed: 0,
        ..kept
    };
    let surveyed = common::survey(&set.files, kept).expect("pass 1");
    let (rows, (chunks, taken)) =
        common::attribute_counted(&set.files, kept, surveyed).expect("pass 2");
    assert!(chunks > 10, "{chunks} chunks kept");
    assert_eq!(taken, chunks);
    let surveyed = common::survey(&set.files, again).expect("pass 1");
    let (parsed, (none, _)) =
        common::attribute_counted(&set.files, again, surveyed).expect("pass 2");
    assert_eq!(none, 0);
    assert_eq!(rows, parsed);
    // (past a budget of 2,000 bytes, the chunks are kept in files, read back and removed)
    let folder = set.beside("kept");
    let stored = logcorr_scan::pipeline::Plan {
        keep_parsed: 2000,
        ..kept
    };
    let surveyed =
        common::survey_keeping(&set.files, stored, Some(folder.clone())).expect("pass 1");
    assert!(std::fs::read_dir(&folder).expect("files kept").count() > 5);
    let (from_files, (chunks, taken)) =
        common::attribute_counted(&set.files, stored, surveyed).expect("pass 2");
    assert_eq!(taken, chunks);
    assert_eq!(from_files, parsed);
    assert!(!folder.exists(), "the folder is removed with the set");
}
