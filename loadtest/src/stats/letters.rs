//! Which strategies a run tells apart, as a partial order that cannot
//! chain: every pair is compared on its own paired rounds, the pairs'
//! p-values are held to a family-wise 5% with Holm's method, and the result
//! is shown as a compact letter display. Two strategies that share a letter
//! are not told apart; two with no letter in common are. `single a,
//! pipeline ab, unnest b` says single is ahead of unnest while pipeline is
//! told apart from neither — where a chain of ties would have called all
//! three level.
//!
//! Holm (1979) rather than one 95% interval per pair: five strategies make
//! ten comparisons, and ten independent calls at 95% allow about a 40%
//! chance of at least one false difference; Holm keeps that chance at 5%
//! for the whole ranking and rejects at least what Bonferroni would.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// The family-wise error rate the letters are held to.
pub const FAMILY_ALPHA: f64 = 0.05;

/// The two-sided p-value of a paired t test on the logarithms of the
/// rounds' ratios (`(a, b)` of one round each): how likely ratios this far
/// from 1 are if the two do not differ. `None` with fewer than two pairs
/// or a side that is not positive.
pub fn paired_p(pairs: &[(f64, f64)]) -> Option<f64> {
    let n = pairs.len();
    if n < 2 || pairs.iter().any(|&(a, b)| !(a > 0.0 && b > 0.0)) {
        return None;
    }
    let logs: Vec<f64> = pairs.iter().map(|&(a, b)| (a / b).ln()).collect();
    let mean = logs.iter().sum::<f64>() / n as f64;
    let var = logs.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let se = (var / n as f64).sqrt();
    if se == 0.0 {
        // Every round gave the same ratio: a difference if it is not 1.
        return Some(if mean.abs() > 1e-12 { 0.0 } else { 1.0 });
    }
    let t = StudentsT::new(0.0, 1.0, (n - 1) as f64).ok()?;
    Some((2.0 * (1.0 - t.cdf((mean / se).abs()))).clamp(0.0, 1.0))
}

/// Holm's step-down method: which of `ps` are rejected (a difference) at a
/// family-wise `alpha`. The smallest p is held to `alpha / m`, the next to
/// `alpha / (m − 1)`, and so on until one is not rejected; none after it
/// is.
pub fn holm(ps: &[f64], alpha: f64) -> Vec<bool> {
    let m = ps.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| ps[a].total_cmp(&ps[b]));
    let mut out = vec![false; m];
    for (k, &i) in order.iter().enumerate() {
        if ps[i] <= alpha / (m - k) as f64 {
            out[i] = true;
        } else {
            break;
        }
    }
    out
}

/// The compact letter display of `n` items (best first) given which pairs
/// are told apart (`apart(i, j)` with `i < j`): Piepho's insert-and-absorb.
/// Every item starts in one group; each pair told apart splits every group
/// holding both into one without either, and groups inside another are
/// dropped. Letters go to the groups in the order of their members, best
/// first, so the first item's group is `a`.
pub fn letters(n: usize, apart: impl Fn(usize, usize) -> bool) -> Vec<String> {
    let mut groups: Vec<Vec<bool>> = vec![vec![true; n]];
    for i in 0..n {
        for j in i + 1..n {
            if !apart(i, j) {
                continue;
            }
            let mut next = Vec::with_capacity(groups.len() + 1);
            for g in groups {
                if g[i] && g[j] {
                    let mut without_i = g.clone();
                    without_i[i] = false;
                    let mut without_j = g;
                    without_j[j] = false;
                    next.push(without_i);
                    next.push(without_j);
                } else {
                    next.push(g);
                }
            }
            groups = absorb(next);
        }
    }
    // Letters in the order of the groups' members, best first: of two
    // groups that both hold the best, the one whose next member ranks
    // higher is `a`.
    let members = |g: &Vec<bool>| -> Vec<usize> {
        g.iter()
            .enumerate()
            .filter(|(_, in_g)| **in_g)
            .map(|(i, _)| i)
            .collect()
    };
    groups.sort_by_key(|g| members(g));
    let mut out = vec![String::new(); n];
    for (k, g) in groups.iter().enumerate() {
        let letter = letter_name(k);
        for (item, _) in g.iter().enumerate().filter(|(_, in_g)| **in_g) {
            out[item].push_str(&letter);
        }
    }
    out
}

/// Drops every group that is empty or inside another (the first of two
/// equal ones is kept).
fn absorb(groups: Vec<Vec<bool>>) -> Vec<Vec<bool>> {
    let inside = |a: &[bool], b: &[bool]| a.iter().zip(b).all(|(x, y)| !x || *y);
    let mut keep: Vec<Vec<bool>> = Vec::with_capacity(groups.len());
    for (k, g) in groups.iter().enumerate() {
        if !g.iter().any(|&x| x) {
            continue;
        }
        let covered = groups
            .iter()
            .enumerate()
            .any(|(other, h)| other != k && inside(g, h) && (g != h || other < k));
        if !covered {
            keep.push(g.clone());
        }
    }
    keep
}

/// `a`…`z`, then `a1`, `b1`… (more groups than letters is not expected).
fn letter_name(k: usize) -> String {
    let base = (b'a' + (k % 26) as u8) as char;
    if k < 26 {
        base.to_string()
    } else {
        format!("{base}{}", k / 26)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apart_of(pairs: &'static [(usize, usize)]) -> impl Fn(usize, usize) -> bool {
        move |i, j| pairs.contains(&(i, j))
    }

    #[test]
    fn a_ahead_of_c_with_b_level_with_both_does_not_chain() {
        // A > C, A ~ B, B ~ C.
        assert_eq!(letters(3, apart_of(&[(0, 2)])), ["a", "ab", "b"]);
    }

    #[test]
    fn of_two_groups_holding_the_best_the_one_ranked_higher_is_a() {
        // The demo at 15:52: every pair with per_row (4) apart, and unnest
        // (2) from batch (3); the rest not told apart.
        let l = letters(5, apart_of(&[(0, 4), (1, 4), (2, 4), (3, 4), (2, 3)]));
        assert_eq!(l, ["ab", "ab", "a", "b", "c"]);
    }

    #[test]
    fn every_pair_apart_gives_every_item_its_own_letter() {
        let l = letters(4, |_, _| true);
        assert_eq!(l, ["a", "b", "c", "d"]);
    }

    #[test]
    fn no_pair_apart_is_one_group() {
        assert_eq!(letters(3, |_, _| false), ["a", "a", "a"]);
    }

    #[test]
    fn two_clusters_share_a_letter_within_and_none_across() {
        // {0, 1} and {2, 3}: every pair across apart, none within.
        let l = letters(4, apart_of(&[(0, 2), (0, 3), (1, 2), (1, 3)]));
        assert_eq!(l, ["a", "a", "b", "b"]);
        // Items that share no letter are exactly the pairs told apart.
        let share = |x: &str, y: &str| x.chars().any(|c| y.contains(c));
        for i in 0..4 {
            for j in i + 1..4 {
                assert_eq!(!share(&l[i], &l[j]), i / 2 != j / 2, "{i} {j} {l:?}");
            }
        }
    }

    #[test]
    fn holm_holds_the_smallest_p_to_alpha_over_m_and_stops_at_the_first_kept() {
        // m = 4: 0.01 ≤ 0.0125 rejected; 0.02 ≤ 0.0167 not, so 0.03 is kept too.
        assert_eq!(
            holm(&[0.03, 0.01, 0.02, 0.5], 0.05),
            [false, true, false, false]
        );
        // 0.001 ≤ 0.0125, 0.015 ≤ 0.0167, 0.02 ≤ 0.025, 0.5 > 0.05.
        assert_eq!(
            holm(&[0.02, 0.001, 0.015, 0.5], 0.05),
            [true, true, true, false]
        );
        // One comparison: the plain 5%.
        assert_eq!(holm(&[0.049], 0.05), [true]);
    }

    #[test]
    fn the_paired_p_is_small_for_a_steady_lead_and_large_for_a_swap() {
        let steady = [
            (110.0, 100.0),
            (111.0, 100.0),
            (109.0, 100.0),
            (110.5, 100.0),
        ];
        assert!(paired_p(&steady).unwrap() < 0.001);
        let swap = [(110.0, 100.0), (95.0, 100.0), (104.0, 100.0), (97.0, 100.0)];
        assert!(paired_p(&swap).unwrap() > 0.3);
        assert_eq!(paired_p(&[(2.0, 1.0)]), None);
        assert_eq!(paired_p(&[(2.0, 1.0), (2.0, 1.0)]), Some(0.0));
        assert_eq!(paired_p(&[(1.0, 1.0), (2.0, 2.0)]), Some(1.0));
    }
}
