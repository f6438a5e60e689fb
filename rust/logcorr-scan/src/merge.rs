//! One step of the timeline's k-way merge: the buffered rows of the runs being merged (each
//! run sorted by the timeline key), taken in key order up to a bound and a number of rows.
//!
//! The timeline key (`_sk`, file, line, part) is unique per row, so the order is the same
//! whatever the runs' pieces and the steps' sizes.

/// A row's timeline key: sort key (time), file, line, part.
pub type Key = (i64, u32, u32, u16);

/// What a step takes.
#[derive(Debug, PartialEq, Eq)]
pub struct Step {
    /// How many leading rows of each run it takes.
    pub taken: Vec<usize>,
    /// The taken rows in key order, as indices into the runs' taken rows laid end to end
    /// (run 0's first, then run 1's...); None when that is their order already.
    pub order: Option<Vec<u32>>,
}

/// Take the smallest rows of the runs (each sorted by key) whose key is at most `bound` (all
/// rows with None), at most `limit` of them (at least one when any is at most `bound`).
pub fn step(runs: &[&[Key]], bound: Option<Key>, limit: usize) -> Step {
    let within = |key: &Key| bound.is_none_or(|b| *key <= b);
    let mut next = vec![0usize; runs.len()];
    let mut picked: Vec<(usize, usize)> = Vec::new();
    while picked.len() < limit.max(1) {
        // (the run whose next row has the smallest key: few runs are merged at once)
        let mut best: Option<(usize, &Key)> = None;
        for (run, rows) in runs.iter().enumerate() {
            if let Some(key) = rows.get(next[run]) {
                if best.is_none_or(|(_, smallest)| key < smallest) {
                    best = Some((run, key));
                }
            }
        }
        let Some((run, key)) = best else { break };
        if !within(key) {
            break;
        }
        picked.push((run, next[run]));
        next[run] += 1;
    }
    let mut start = Vec::with_capacity(runs.len());
    let mut total = 0usize;
    for &taken in &next {
        start.push(total);
        total += taken;
    }
    let order: Vec<u32> = picked
        .iter()
        .map(|&(run, index)| (start[run] + index) as u32)
        .collect();
    let in_place = order
        .iter()
        .enumerate()
        .all(|(at, &index)| at == index as usize);
    Step {
        taken: next,
        order: (!in_place).then_some(order),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn keys(rows: &[(i64, u32)]) -> Vec<Key> {
        rows.iter().map(|&(sk, line)| (sk, 0, line, 0)).collect()
    }

    #[test]
    fn rows_are_taken_in_key_order_up_to_the_bound() {
        let a = keys(&[(1, 1), (3, 2), (5, 3)]);
        let b = keys(&[(2, 10), (3, 11), (9, 12)]);
        let step = step(&[&a, &b], Some((3, 0, 11, 0)), 100);
        assert_eq!(step.taken, vec![2, 2]);
        // a's (1), b's (2), a's (3, line 2), b's (3, line 11)
        assert_eq!(step.order, Some(vec![0, 2, 1, 3]));
        let lower = super::step(&[&a, &b], Some((3, 0, 5, 0)), 100);
        assert_eq!(lower.taken, vec![2, 1]);
        assert_eq!(lower.order, Some(vec![0, 2, 1]));
    }

    #[test]
    fn runs_that_do_not_interleave_need_no_order() {
        let a = keys(&[(1, 1), (2, 2)]);
        let b = keys(&[(3, 1), (4, 2)]);
        assert_eq!(
            step(&[&a, &b], None, 100),
            Step {
                taken: vec![2, 2],
                order: None
            }
        );
    }

    #[test]
    fn a_limit_takes_the_smallest_rows() {
        let a = keys(&[(1, 1), (4, 2)]);
        let b = keys(&[(2, 1), (3, 2)]);
        let step = step(&[&a, &b], None, 3);
        assert_eq!(step.taken, vec![1, 2]);
        assert_eq!(step.order, None);
    }

    proptest! {
        #[test]
        fn steps_give_the_rows_sorted(
            runs in proptest::collection::vec(
                proptest::collection::vec((0i64..20, 0u32..3), 0..30), 1..5),
            limit in 1usize..40,
        ) {
            // (each run sorted, keys unique across runs: the run's number is the file)
            let runs: Vec<Vec<Key>> = runs
                .into_iter()
                .enumerate()
                .map(|(file, rows)| {
                    let mut rows: Vec<Key> = rows
                        .into_iter()
                        .enumerate()
                        .map(|(line, (sk, part))| (sk, file as u32, line as u32, part as u16))
                        .collect();
                    rows.sort();
                    rows
                })
                .collect();
            let mut expected: Vec<Key> = runs.iter().flatten().copied().collect();
            expected.sort();
            let mut left: Vec<&[Key]> = runs.iter().map(Vec::as_slice).collect();
            let mut merged = Vec::new();
            loop {
                let step = step(&left, None, limit);
                let taken: Vec<Key> = left
                    .iter()
                    .zip(&step.taken)
                    .flat_map(|(rows, &n)| rows[..n].iter().copied())
                    .collect();
                if taken.is_empty() {
                    break;
                }
                prop_assert!(taken.len() <= limit);
                match step.order {
                    Some(order) => merged.extend(order.iter().map(|&i| taken[i as usize])),
                    None => merged.extend(taken),
                }
                for (rows, &n) in left.iter_mut().zip(&step.taken) {
                    *rows = &rows[n..];
                }
            }
            prop_assert_eq!(merged, expected);
        }
    }
}
