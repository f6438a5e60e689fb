//! Every pattern the scanner applies to log text, in one place (`regex` crate syntax: the
//! engine runs in time linear in the line whatever the pattern).
//!
//! The Python side reads the few it also needs (the diagnosis's message patterns) through
//! `logcorr._core.PATTERNS`, so that a rule is written once.

use regex::Regex;
use std::sync::LazyLock;

macro_rules! pattern {
    ($(#[$doc:meta])* $name:ident, $re:ident = $text:expr) => {
        $(#[$doc])*
        pub const $name: &str = $text;
        pub static $re: LazyLock<Regex> = LazyLock::new(|| Regex::new($name).expect($name));
    };
}

// ------------------------------------------------------------------------------- shared

/// The SGLang date-time stamp (`2026-11-29 10:00:00(.mmm)`).
pub const SGL_STAMP: &str = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?";
/// SGLang's rank tokens (order-free; `PID` is the proposed trailing token).
pub const RANK_TOKEN: &str = r"(?:DP|PP|ATTN_CP|MOE_DP|TP|EP|PID)\d+";
/// An encoder server's prefix (EPD disaggregation, 0.5.14+); it names no scheduler.
pub const ENCODER_TOKEN: &str = r"encode_server|encode_dp_worker\[\d+\]";
/// An NCCL header's host (`g183`, `node-1.cluster`, `[::1]`-like pieces).
pub const NCCL_HOST: &str = r"[\w.\-\[\]]+";

fn sgl_header() -> String {
    format!(r"\[{SGL_STAMP}(?: {RANK_TOKEN})*(?: (?:{ENCODER_TOKEN}))?\] ")
}

fn nccl_header() -> String {
    format!(r"{NCCL_HOST}:\d+:\d+ \[\d+\] (?:[\w./\-]+:\d+ )?NCCL ")
}

macro_rules! built {
    ($(#[$doc:meta])* $re:ident = $build:expr) => {
        $(#[$doc])*
        pub static $re: LazyLock<Regex> = LazyLock::new(|| {
            let text: String = $build;
            Regex::new(&text).expect(stringify!($re))
        });
    };
}

// ------------------------------------------------------------------------------- sglang

built!(
    /// Any SGLang shape: time only (`[15:58:39 TP0]`), a missing `[`, the date optional.
    SGL_GENERAL = format!(
        r"^(\[)?(?:(\d{{4}}-\d\d-\d\d) )?(\d\d:\d\d:\d\d)(?:\.(\d{{3}}))?((?: {RANK_TOKEN})*)( (?:{ENCODER_TOKEN}))?\](?: |$)"
    )
);
built!(
    /// Cheap test before `SGL_GENERAL`.
    SGL_GENERAL_HINT = r"^\[?\d\d(?:\d\d-\d\d-\d\d |:\d\d:\d\d)".to_string()
);
built!(
    /// A tail of rank tokens only (` DP5 TP10 EP10`).
    SGL_TOKENS = format!(r"^(?: {RANK_TOKEN})*$")
);
built!(
    /// An encoder server's tail (` encode_server`).
    SGL_ENCODER = format!(r"^ (?:{ENCODER_TOKEN})$")
);
pattern!(
    /// Messages only the main process (HTTP server, tokenizer manager) writes: an empty
    /// prefix alone proves nothing (a TP1 scheduler has one too).
    MAIN_PROOF,
    MAIN_PROOF_RE = concat!(
        r"^[^\]]*\] (?:server_args=(?:ServerArgs\(|\{)|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s",
        r"|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) (?:server_args|http_server|tokenizer_manager|engine",
        r"|launch_server)\.py:\d+: |The server is fired up|Received sigquit from a child proces",
        r"|kill_process_tree|Subprocess scheduler_\S* \(pid=\d+\) crashed",
        r"|SIGQUIT received\. signum|SIGTERM received\. signum|Signal SIGTERM received while ",
        r"|Dumping requests before crash|Dumped \d+ finished and \d+ unfinished requests before crash",
        r"|Request is disconnected from the client side|Gracefully exiting\.\.\.",
        r"|Health check failed\. Server couldn't get a response|Rank \d+ scheduler is dead)"
    )
);
pattern!(
    /// The logged launch arguments.
    SERVER_ARGS,
    SERVER_ARGS_RE = r"^[^\]]*\] server_args=(?:ServerArgs\(|\{)"
);
pattern!(
    /// SGLang 0.2.x TP workers: `[gpu=N] message`.
    GPU,
    GPU_RE = r"^\[gpu=(\d+)\] "
);
pattern!(
    /// A scheduler's watchdog dumping a process with py-spy (the PID it names).
    PYSPY,
    PYSPY_RE = concat!(
        r"^[^\]]*\] (?:Pyspy (?:dump for|failed to dump) PID |Pyspy failed \(py-spy dump ",
        r"[^)]*--pid |All pyspy dump attempts failed for PID )(\d+)"
    )
);
pattern!(
    /// Cheap test before `PYSPY`.
    PYSPY_HINT,
    PYSPY_HINT_RE =
        r"\] (?:Pyspy (?:dump for|failed to dump) PID |Pyspy failed \(py-spy|All pyspy dump)"
);

// ------------------------------------------------------------------------------- nccl

pattern!(
    /// An NCCL header before ` NCCL ` (optionally behind a bare SGLang stamp).
    NCCL_HEAD,
    NCCL_HEAD_RE = r"^(?:\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?)\] )?([\w.\-\[\]]+):(\d+):(\d+) \[(\d+)\](?: [\w./\-]+:\d+)?$"
);
pattern!(
    /// An NCCL header's `host:pid:tid` alone (a cut-off line's start).
    NCCL_FRAGMENT,
    NCCL_FRAGMENT_RE = r"^([\w.\-\[\]]+):(\d+):(\d+)$"
);
pattern!(
    /// A communicator line's pointer, rank and size.
    COMM,
    COMM_RE = concat!(
        r"(?:\[Rank \d+\] )?(?:(?:ncclCommInitRank(?:Config)?|ncclCommInitAll|ncclCommSplit) )?",
        r"comm (0x[0-9a-fA-F]+) rank (-?\d+) n[Rr]anks (\d+)"
    )
);
pattern!(COMM_ID, COMM_ID_RE = r" commId (0x[0-9a-fA-F]+)");
pattern!(
    /// NCCL 2.23+ prints a split's START before its commId exists.
    COMM_SPLIT,
    COMM_SPLIT_RE = r" splitCount (\d+) color (-?\d+) key -?\d+"
);
pattern!(
    NCCL_PHASE,
    NCCL_PHASE_RE = r" ?- (Init START|Init COMPLETE|Abort COMPLETE)\s*$"
);
pattern!(
    /// Colour codes and Ray's dedup suffix: such lines leave the fast paths.
    JUNK_HINT,
    JUNK_HINT_RE = r"\x1b|\[repeated |\[[0-9;]{1,6}m"
);
pattern!(
    JUNK,
    JUNK_RE = r"\x1b\[[0-9;?]*[A-Za-z]|\[[0-9;]{1,6}m| ?\[repeated \d+x across cluster\]"
);

// ------------------------------------------------------------------------------- torch

pattern!(
    /// A c10 header (`[E1016 03:31:38.928019586 ProcessGroupNCCL.cpp:607] `).
    TORCH_HEADER,
    TORCH_HEADER_RE = r"^ *\[([IWEF])(?:(\d{3,4}) (\d\d:\d\d:\d\d)(?:\.(\d+))? )? ?[\w./*\-]+:\d+\] "
);
pattern!(TORCH_HINT, TORCH_HINT_RE = r"^ *\[[IWEF](?:\d| )");
pattern!(
    /// A process group's identity: torch 2.5+ `[PG ID 2 PG GUID 3(tp:device) Rank 1]`,
    /// torch 2.4 `[PG 3 (tp:device) Rank 1]`, or `[Rank 1]`.
    PG_TAG,
    PG_TAG_RE = concat!(
        r"\[(?:PG ID (\d+) PG GUID ([^\s(\]]*)(?:\(([^)]*)\))?|PG (\w+)(?: \(([^)]*)\))?) Rank (\d+)\]",
        r"|\[Rank (\d+)\]"
    )
);
pattern!(WORK, WORK_RE = r"WorkNCCL\(SeqNum=(-?\d+), OpType=(\w+)");
pattern!(
    AT_WORK,
    AT_WORK_RE =
        r"(?:detected by watchdog at work|Timeout at NCCL work|at work sequence id): (-?\d+)"
);
pattern!(
    COUNTERS,
    COUNTERS_RE =
        r"[Ll]ast enqueued (?:NCCL )?work: (-?\d+), last completed (?:NCCL )?work: (-?\d+)"
);
pattern!(
    FACT_HINT,
    FACT_HINT_RE = r"Rank \d|WorkNCCL\(|work: |sequence id"
);
pattern!(
    /// A frame in the main executable names the process title SGLang set.
    FRAME_TITLE,
    FRAME_TITLE_RE = r"^frame #\d+: .* \(0x[0-9a-fA-F]+ in (sglang::\S+)\)\s*$"
);
/// First words of a C++ exception tail.
pub const CPP_STARTS: [&str; 5] = [
    "terminate called after throwing",
    "terminate called recursively",
    "  what():",
    "Exception raised from ",
    "frame #",
];

// ------------------------------------------------------------------------------- python

pattern!(
    GLOG,
    GLOG_RE = r"^([IWEFV])(\d{4}) (\d\d:\d\d:\d\d)(?:\.(\d{6}))?(?: +(\d+))? [^\]\s]+:\d+\] "
);
pattern!(GLOG_HINT, GLOG_HINT_RE = r"^[IWEFV]\d{4} \d\d:");
pattern!(FILE_TB, FILE_TB_RE = r#"^\s*File "[^"]*", line \d+, in "#);
pattern!(FILE_FH, FILE_FH_RE = r#"^\s*File "[^"]*", line \d+ in "#);
pattern!(FILE_START, FILE_START_RE = r#"^\s*File ""#);
pattern!(
    /// An exception's closing line (`RuntimeError: …`).
    EXC,
    EXC_RE = r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Fault|Failure)(?:: |:$|$)"
);
pattern!(
    PYSPY_FRAME,
    PYSPY_FRAME_RE = r"^ {4}[\w.<>:~\[\]$@ ]+ \([^()\s]+\)$"
);
pattern!(PROCESS, PROCESS_RE = r"^Process (\d+): (\S.*)$");
pattern!(
    THREAD,
    THREAD_RE = r"^Thread (\d+) \((?:idle|active|gil)[^)]*\): "
);
pattern!(PYTHON_V, PYTHON_V_RE = r"^Python v\d");
pattern!(TB_BODY, TB_BODY_RE = r"^    \S|^\s+[\^~]+\s*$");
/// multiprocessing's `Process SpawnProcess-1:` before a dead child's traceback.
pub const CHILD_DIED: &str = r"Process [A-Za-z]\w*-\d+:\s*$";
built!(
    /// What opens a raw record of its own (unless the line before announces it).
    OPENS_RE = format!(
        r"^(?:Traceback \(most recent call last\)|Exception in [\w.]+:\s*$|Fatal Python error: |{CHILD_DIED})"
    )
);
/// The text of `OPENS_RE`.
pub fn opens() -> String {
    OPENS_RE.as_str().to_string()
}
pub const TRACEBACK_STARTS: [&str; 3] = [
    "Traceback (most recent call last)",
    "During handling of the above exception",
    "The above exception was the direct cause",
];
pub const FAULT_STARTS: [&str; 6] = [
    "Fatal Python error: ",
    "Thread 0x",
    "Current thread 0x",
    "Extension modules: ",
    "<no Python frame>",
    "  <no Python frame>",
];

// ------------------------------------------------------------------------------- misc

pattern!(
    UVICORN,
    UVICORN_RE = r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s{1,9}\S"
);
pattern!(TQDM, TQDM_RE = r"it/s[\],]|s/it[\],]|\d%\||% Completed \|");
pattern!(
    CANN_ERROR,
    CANN_ERROR_RE = r"^\[ERROR\] (\d{4}-\d\d-\d\d)-(\d\d:\d\d:\d\d) \(PID:(\d+), Device:(-?\d+), RankID:(-?\d+)\)"
);
pattern!(
    /// The SGLang router / model gateway (Rust tracing).
    ROUTER,
    ROUTER_RE = concat!(
        r"^ *(?:(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z? +)?",
        r"(TRACE|DEBUG|INFO|WARN|ERROR) +(?:\w+\{[^{}]*\}: ?)*",
        r"(?:sglang_router|sgl_model_gateway|smg)\w*::"
    )
);
pattern!(UCX, UCX_RE = r"^\[([\w.\-]+):(\d+):\d+:(\d+)\] ");
pattern!(
    GLOO_CONNECTED,
    GLOO_CONNECTED_RE = r"^\[Gloo\] Rank (\d+) is connected to (\d+) peer ranks"
);
pattern!(CANN_LINE, CANN_LINE_RE = r"^E[A-Z]\d{4}:?\s*\[PID: \d+\]");
pattern!(
    CANN_CHAINS,
    CANN_CHAINS_RE = r"\bE[A-Z]\d{4}: Inner Error!?\s*$"
);
pattern!(
    CANN_CODE,
    CANN_CODE_RE = r"(?:^|detail:)(E[A-Z]\d{4})?(?::\s*)?\[PID: (\d+)\] (\d{4}-\d\d-\d\d)-(\d\d:\d\d:\d\d)\.(\d{3})\.(\d{3})"
);
pattern!(
    /// bash reporting a job it ran (`./run.sh: line 22: 103525 Killed   python …`).
    SHELL_JOB,
    SHELL_JOB_RE = concat!(
        r"^(?:[^\s:]+: line \d+: \d+|\[\d+\][+-]?) +(?:Killed|Terminated|Aborted|",
        r"Segmentation fault|Bus error|Hangup|Quit|Done|Exit \d+)(?: \(core dumped\))? +\S"
    )
);

// ------------------------------------------------------------------------------- wrappers

const COLOUR: &str = r"(?:\x1b\[[0-9;?]*[A-Za-z]|\[[0-9;]{1,6}m)";
/// Terminal control sequences a line can start with before its wrapper: erase-line, cursor
/// moves and colours (`ESC[2K`, `ESC[1A`, `ESC[0G`, `ESC[36m`; docker compose on a terminal
/// clears the line before each `service  | `), and a carriage return.
const LEAD_CONTROL: &str = r"(?:\x1b\[[0-9;?]*[A-Za-z]|\r)*";
const ISO: &str = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?";

built!(
    /// `pdsh` host prefix before a line that has a header of its own.
    PDSH_RE = format!(
        r"^([A-Za-z][\w.\-]*): (?:{NCCL_HOST}:\d+:\d+ \[\d+\] |\[\d{{4}}-\d\d-\d\d[ T]|\[rank\d+\]:|\[[IWEF]\d{{3,4}} |\[\d\d:\d\d:\d\d[ \]]|\[default\d+\]:)"
    )
);
built!(
    /// Every outer prefix a launcher, collector or viewer adds (each piece optional).
    WRAP_RE = [
        r"^(?P<wrap>",
        LEAD_CONTROL,
        r"(?:(?P<compose>[A-Za-z][\w.\-]*[-_]\d+) +\| )?",
        r"(?:(?P<task>\d{1,5}): )?",
        r"(?:\x00|\x1b\[[0-9;?]*[A-Za-z])*",
        r"(?:\[\d{1,9}\] )?",
        r"(?:\[(?P<kpod>pod/[^/\]\s]+)/[^\]\s]+\] )?",
        &format!(r"(?:(?P<cri>{ISO}(?:Z|[+-]\d\d:\d\d)) (?:stdout|stderr) [FP] "),
        &format!(r"|(?P<kts>{ISO}(?:Z|[+-]\d\d:\d\d)) "),
        &format!(r"|\d{{10,16}}\t(?P<loki>{ISO}Z)\t"),
        &format!(r"|\[(?P<coll>{ISO}Z)\] ?"),
        r"|(?P<lts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})  (?P<lhost>[^\s\[\]]+) ",
        r"|(?P<pylog>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - [\w.<>\-]+ - ",
        r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - ",
        r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<vmd>\d\d)-(?P<vday>\d\d) ",
        r"(?P<vhms>\d\d:\d\d:\d\d)(?:\.(?P<vfrac>\d+))? [\w.\-]+:\d+\] )?",
        r"(?:(?P<mhost>[\w.\-]+) \[(?:stdout|stderr)\] )?",
        &format!(
            r"(?: ?{COLOUR}?\((?P<ray>\w+ pid=\d+(?:, ip=[\w.\-:]+)?)\)(?: ?{COLOUR})? ?)?"
        ),
        r"(?: ?(?:(?:[\w.\-]+/\d+ |\d+:)?\[(?P<tlocal>default\d+)\]:)?(?:\[rank(?P<trank>\d+)\]:)+ ?",
        r"| ?(?:[\w.\-]+/\d+ |\d+:)?\[(?P<tlocal2>default\d+)\]:)?",
        r")",
    ]
    .concat()
);
pattern!(
    /// First characters a wrapped line can start with.
    WRAP_STARTS,
    WRAP_STARTS_RE = r"^(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d |[A-Za-z][\w.\-]*[-_]\d+ +\| |[\x00\x1b\r(0-9]| [\[(\x1b]|\[(?:\d{1,9}\]|20\d\d-\d\d-\d\dT|default|rank|\d\dm|\d;|pod/)|[\w.\-]+ \[std|[\w.\-]+/\d+ \[def)"
);
pattern!(
    DOCKER_LOG,
    DOCKER_LOG_RE = r#"^\{"log":"((?:[^"\\]|\\.)*)""#
);
pattern!(
    DOCKER_TIME,
    DOCKER_TIME_RE = r#""time":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z)""#
);
pattern!(DOCKER_END, DOCKER_END_RE = r"(?:\\r)?(?:\\n)?$");

// ------------------------------------------------------------------------------- parts

built!(
    /// Where a glued record starts inside a line.
    SPLIT_RE = format!(r"(?:\[{SGL_STAMP}\] )?{}|{}", nccl_header(), sgl_header())
);
built!(
    /// A torch c10 line glued after another (`… before timing[rank5]:[E1129 10:11:09.12 …`).
    TORCH_SPLIT_RE = r"([^:\]])((?:\[rank\d+\]:)+\[[IWEF]\d{3,4} \d\d:\d\d:\d\d)".to_string()
);
built!(TORCH_RANKS_RE = r"^(?:\[rank(\d+)\]:)+".to_string());
built!(NCCL_AT_START_RE = format!(r"^(?:\[{SGL_STAMP}\] )?{}", nccl_header()));
built!(NCCL_BARE_START_RE = format!(r"^{}", nccl_header()));
built!(NCCL_HOST_AT_START_RE = format!(r"^(?:\[{SGL_STAMP}\] )?({NCCL_HOST}):\d+:\d+ \[\d+\] "));
built!(TOKEN_BEFORE_COLON_RE = r"^([^:]+):".to_string());

// ------------------------------------------------------------------------------- chaining

built!(
    /// A line ending with `:` announces the next (`During handling …:`).
    CHAINS_RE = r":$".to_string()
);
built!(
    /// Opens an exception record (`_exc`).
    EXCEPTION_HEADER_RE =
        r"hit an exception|Traceback \(most recent call last\)|Fatal Python error".to_string()
);

/// Messages by which a process tells its role on a line without rank tokens, in order: the
/// first that holds wins.
pub const ROLE_STEMS: [(&str, &str); 23] = [
    ("DataParallelController hit an exception", "dp_controller"),
    ("DetokenizerManager hit an exception", "detokenizer"),
    ("TokenizerManager hit an exception", "main"),
    ("] DataParallelController watchdog timeout", "dp_controller"),
    ("] DetokenizerManager watchdog timeout", "detokenizer"),
    ("] TokenizerManager watchdog timeout", "main"),
    ("] Scheduler hit an exception", "scheduler"),
    ("] TpModelWorkerClient hit an exception", "scheduler"),
    ("Exception in ModelTpServer", "scheduler"),
    ("Exception in run_tp_server", "scheduler"),
    ("] Load weight begin", "scheduler"),
    ("] Load weight end", "scheduler"),
    ("] KV Cache is allocated", "scheduler"),
    ("] Memory pool end", "scheduler"),
    ("] Capture cuda graph begin", "scheduler"),
    ("] Capture cuda graph end", "scheduler"),
    ("] Decode batch", "scheduler"),
    ("] Prefill batch", "scheduler"),
    ("] max_total_num_tokens=", "scheduler"),
    ("] Init torch distributed begin", "scheduler"),
    ("] Init torch distributed ends", "scheduler"),
    ("] Scheduler watchdog timeout", "scheduler"),
    ("] Watchdog timeout (self.watchdog_timeout", "scheduler"),
];

/// Every compiled pattern (for a test that each one compiles).
pub fn all() -> Vec<&'static Regex> {
    vec![
        &SGL_GENERAL,
        &SGL_GENERAL_HINT,
        &SGL_TOKENS,
        &SGL_ENCODER,
        &MAIN_PROOF_RE,
        &SERVER_ARGS_RE,
        &GPU_RE,
        &PYSPY_RE,
        &PYSPY_HINT_RE,
        &NCCL_HEAD_RE,
        &NCCL_FRAGMENT_RE,
        &COMM_RE,
        &COMM_ID_RE,
        &COMM_SPLIT_RE,
        &NCCL_PHASE_RE,
        &JUNK_HINT_RE,
        &JUNK_RE,
        &TORCH_HEADER_RE,
        &TORCH_HINT_RE,
        &PG_TAG_RE,
        &WORK_RE,
        &AT_WORK_RE,
        &COUNTERS_RE,
        &FACT_HINT_RE,
        &FRAME_TITLE_RE,
        &GLOG_RE,
        &GLOG_HINT_RE,
        &FILE_TB_RE,
        &FILE_FH_RE,
        &FILE_START_RE,
        &EXC_RE,
        &PYSPY_FRAME_RE,
        &PROCESS_RE,
        &THREAD_RE,
        &PYTHON_V_RE,
        &TB_BODY_RE,
        &OPENS_RE,
        &UVICORN_RE,
        &TQDM_RE,
        &CANN_ERROR_RE,
        &ROUTER_RE,
        &UCX_RE,
        &GLOO_CONNECTED_RE,
        &CANN_LINE_RE,
        &CANN_CHAINS_RE,
        &CANN_CODE_RE,
        &SHELL_JOB_RE,
        &PDSH_RE,
        &WRAP_RE,
        &WRAP_STARTS_RE,
        &DOCKER_LOG_RE,
        &DOCKER_TIME_RE,
        &DOCKER_END_RE,
        &SPLIT_RE,
        &TORCH_SPLIT_RE,
        &TORCH_RANKS_RE,
        &NCCL_AT_START_RE,
        &NCCL_BARE_START_RE,
        &NCCL_HOST_AT_START_RE,
        &TOKEN_BEFORE_COLON_RE,
        &CHAINS_RE,
        &EXCEPTION_HEADER_RE,
    ]
}

/// The patterns the Python side applies too (the diagnosis reads event rows' text with them),
/// by name.
pub fn shared() -> Vec<(&'static str, String)> {
    vec![
        ("CHILD_DIED", CHILD_DIED.to_string()),
        ("WORK", WORK.to_string()),
        ("COUNTERS", COUNTERS.to_string()),
        ("OPENS", opens()),
        ("EXC", EXC.to_string()),
    ]
}
