//! Ordering the job and stage lists of a workload file: a stable topological order, or the
//! cycles that prevent one.

use std::collections::BTreeSet;

/// A topological order of `deps` (`deps[i]` = the items `i` waits for) as a list of old indices,
/// or every cycle that prevents one.
///
/// Stable: among the items whose dependencies are all placed, the earliest in the list goes
/// next, so a list that is already in a topological order keeps its order. Each cycle is a walk
/// of old indices that starts at the earliest member of its strongly connected component and
/// follows `deps` back to it (the closing repetition is left out); cycles come in the order of
/// those first members. Items that only wait on a cycle are not reported.
pub(crate) fn topological_order(deps: &[Vec<usize>]) -> Result<Vec<usize>, Vec<Vec<usize>>> {
    let n = deps.len();
    let mut waiting_on: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, ds) in deps.iter().enumerate() {
        for &d in ds {
            dependents[d].push(i);
        }
    }
    let mut ready: BTreeSet<usize> = (0..n).filter(|&i| waiting_on[i] == 0).collect();
    let mut order = Vec::with_capacity(n);
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &j in &dependents[i] {
            waiting_on[j] -= 1;
            if waiting_on[j] == 0 {
                ready.insert(j);
            }
        }
    }
    if order.len() == n {
        return Ok(order);
    }
    let stuck: Vec<bool> = (0..n).map(|i| waiting_on[i] > 0).collect();
    Err(cycles(deps, &stuck))
}

/// One walk per strongly connected component (of two or more members, or with a self-edge)
/// among the stuck items.
fn cycles(deps: &[Vec<usize>], stuck: &[bool]) -> Vec<Vec<usize>> {
    let n = deps.len();
    let reach: Vec<Vec<bool>> =
        (0..n).map(|s| if stuck[s] { reachable(deps, stuck, s) } else { Vec::new() }).collect();
    let mut reported = vec![false; n];
    let mut out = Vec::new();
    for s in (0..n).filter(|&s| stuck[s]) {
        if reported[s] || !reach[s][s] {
            continue;
        }
        let component: Vec<bool> = (0..n).map(|v| stuck[v] && reach[s][v] && reach[v][s]).collect();
        for (v, inside) in component.iter().enumerate() {
            reported[v] |= *inside;
        }
        out.push(walk_back_to(deps, &component, s));
    }
    out
}

/// `reach[v]`: `v` is reachable from `s` by one or more `deps` edges among stuck items.
fn reachable(deps: &[Vec<usize>], stuck: &[bool], s: usize) -> Vec<bool> {
    let mut seen = vec![false; deps.len()];
    let mut stack: Vec<usize> = deps[s].iter().copied().filter(|&d| stuck[d]).collect();
    while let Some(v) = stack.pop() {
        if !seen[v] {
            seen[v] = true;
            stack.extend(deps[v].iter().copied().filter(|&d| stuck[d] && !seen[d]));
        }
    }
    seen
}

/// The shortest walk from `s` along `deps` inside `component` that returns to `s`.
fn walk_back_to(deps: &[Vec<usize>], component: &[bool], s: usize) -> Vec<usize> {
    let mut parent: Vec<Option<usize>> = vec![None; deps.len()];
    let mut queue = std::collections::VecDeque::from([s]);
    let mut visited = vec![false; deps.len()];
    visited[s] = true;
    while let Some(v) = queue.pop_front() {
        for &d in &deps[v] {
            if d == s {
                let mut walk = vec![v];
                while let Some(p) = parent[*walk.last().unwrap_or(&s)] {
                    walk.push(p);
                }
                walk.reverse();
                return walk;
            }
            if component[d] && !visited[d] {
                visited[d] = true;
                parent[d] = Some(v);
                queue.push_back(d);
            }
        }
    }
    vec![s]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_order_that_is_already_topological_is_kept() {
        let deps = vec![vec![], vec![0], vec![], vec![1, 2]];
        assert_eq!(topological_order(&deps), Ok(vec![0, 1, 2, 3]));
    }

    #[test]
    fn forward_references_move_the_dependency_first_and_nothing_else() {
        // 0 waits for 2; 1 is independent and keeps its place after 0's dependency.
        let deps = vec![vec![2], vec![], vec![]];
        assert_eq!(topological_order(&deps), Ok(vec![1, 2, 0]));
        let deps = vec![vec![3], vec![0], vec![], vec![]];
        assert_eq!(topological_order(&deps), Ok(vec![2, 3, 0, 1]));
    }

    #[test]
    fn cycles_are_walks_from_their_earliest_member() {
        // 1 → 3 → 2 → 1 is a cycle; 0 waits on it; 4 is a self-loop; 5 is free.
        let deps = vec![vec![1], vec![3], vec![1], vec![2], vec![4], vec![]];
        assert_eq!(topological_order(&deps), Err(vec![vec![1, 3, 2], vec![4]]));
    }

    #[test]
    fn two_separate_cycles_are_both_reported() {
        let deps = vec![vec![1], vec![0], vec![3], vec![2]];
        assert_eq!(topological_order(&deps), Err(vec![vec![0, 1], vec![2, 3]]));
    }

    #[test]
    fn the_shortest_cycle_through_the_first_member_is_named() {
        // 0 waits for 1 and 2; 1 waits for 0; 2 waits for 1: the walk is 0 → 1 → 0.
        let deps = vec![vec![1, 2], vec![0], vec![1]];
        assert_eq!(topological_order(&deps), Err(vec![vec![0, 1]]));
    }
}
