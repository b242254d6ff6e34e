//! The index by which `null.wgsl` removes the null space of a singular operator: each group of unknowns
//! without a Dirichlet neighbour (a pocket of liquid sealed by walls: the volume correction's solve has one
//! per body of liquid) loses its mean. Built on the host from the operator's labels, once per operator.
//!
//! The first pass sums each group over each workgroup of cells that holds some of it (a slot per such
//! workgroup and group); the second adds each group's slots in workgroup order. Both orders are fixed, so
//! the means repeat bit for bit; most workgroups hold one group or none, so the two passes read about as
//! much as one over the grid.

use rayon::prelude::*;

/// A cell outside every group.
const NO_LABEL: u32 = u32::MAX;

/// The index of `null.wgsl` (the layout is described there) and its two counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct NullIndex {
    pub words: Vec<u32>,
    /// The groups.
    pub groups: u32,
    /// The slots: the (workgroup, group) pairs with cells.
    pub entries: u32,
}

/// The index of the groups `labels` gives each padded cell (0, 1, …; `u32::MAX` for none), of `sizes`
/// cells each, for workgroups of `per` consecutive cells.
pub(super) fn null_index(labels: &[u32], sizes: &[usize], per: usize) -> NullIndex {
    // Each workgroup's groups, in the order of their first cell in it.
    let slots: Vec<Vec<u32>> = labels
        .par_chunks(per)
        .map(|cells| {
            let mut groups: Vec<u32> = Vec::new();
            for &g in cells {
                if g != NO_LABEL && !groups.contains(&g) {
                    groups.push(g);
                }
            }
            groups
        })
        .collect();
    let workgroups = slots.len();
    let entries: usize = slots.iter().map(Vec::len).sum();
    let groups = sizes.len();
    let mut words = Vec::with_capacity(workgroups + 1 + 2 * entries + 2 * groups + 1);
    let mut at = 0;
    for s in &slots {
        words.push(at as u32);
        at += s.len();
    }
    words.push(at as u32);
    words.extend(slots.iter().flatten());
    // Each group's slots in workgroup order, from where its range starts.
    let mut starts = vec![0u32; groups + 1];
    for &g in slots.iter().flatten() {
        starts[g as usize + 1] += 1;
    }
    for g in 0..groups {
        starts[g + 1] += starts[g];
    }
    let mut filled = starts.clone();
    for &g in slots.iter().flatten() {
        words.push(filled[g as usize]);
        filled[g as usize] += 1;
    }
    words.extend(&starts);
    words.extend(sizes.iter().map(|&n| n as u32));
    NullIndex {
        words,
        groups: groups as u32,
        entries: entries as u32,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Three workgroups of four cells: the slots, their groups, where their sums go and each group's range.
    #[test]
    fn the_index_lists_each_workgroups_groups_and_each_groups_slots() {
        let x = NO_LABEL;
        let labels = [x, 1, 1, 0, /**/ 0, 0, x, x, /**/ 2, 1, x];
        let index = null_index(&labels, &[3, 3, 1], 4);
        assert_eq!((index.groups, index.entries), (3, 5));
        #[rustfmt::skip]
        let want = vec![
            0, 2, 3, 5,       // where each workgroup's slots start, then the end
            1, 0, 0, 2, 1,    // each slot's group
            2, 0, 1, 4, 3,    // each slot's sum: group 0's at 0 and 1, group 1's at 2 and 3, group 2's at 4
            0, 2, 4, 5,       // where each group's sums start, then the end
            3, 3, 1,          // each group's cells
        ];
        assert_eq!(index.words, want);
    }

    /// Without groups the index is the workgroups' empty ranges and one group start.
    #[test]
    fn no_groups_no_slots() {
        let index = null_index(&[NO_LABEL; 9], &[], 4);
        assert_eq!(index.words, vec![0, 0, 0, 0, 0]);
        assert_eq!((index.groups, index.entries), (0, 0));
    }
}
