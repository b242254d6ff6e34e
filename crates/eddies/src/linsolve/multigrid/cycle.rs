//! The multigrid cycles (Briggs, Henson & McCormick 2000): the V-cycle in the correction scheme and the
//! full-multigrid start, over the levels of the hierarchy with the smoothers of [`super::smooth`] and the
//! transfers of [`super::transfer`].

use super::smooth::{smooth, solve_coarsest};
use super::transfer::{extend, prolong, restrict_boundary, restrict_to, Fine, Prolong};
use super::{fill, Multigrid};
use crate::grid::Real;

impl<const D: usize, T: Real> Multigrid<D, T> {
    /// A V-cycle on the vectors of level `top` down to the coarsest, whose first `presmoothed` sweeps on level
    /// `top` are done already.
    pub(super) fn vcycle_from(&mut self, top: usize, presmoothed: usize) {
        let p = self.params;
        let last = self.levels.len() - 1;
        for l in top..last {
            let (lo, hi) = self.levels.split_at_mut(l + 1);
            let (fine, coarse) = (&mut lo[l], &mut hi[0]);
            let done = if l == top { presmoothed } else { 0 };
            smooth(
                &fine.op,
                &fine.inv,
                &fine.b,
                &mut fine.x,
                &mut fine.t,
                p.smoother,
                p.pre_sweeps - done,
                false,
            );
            let r = Fine::Residual {
                b: &fine.b,
                x: &fine.x,
            };
            restrict_to(&fine.op, r, coarse, p.restriction);
            fill(&mut coarse.x, T::ZERO);
        }
        let c = &mut self.levels[last];
        solve_coarsest(&c.op, &c.inv, &c.b, &mut c.x, &mut c.t, p.coarsest_sweeps);
        for l in (top..last).rev() {
            let (lo, hi) = self.levels.split_at_mut(l + 1);
            let (fine, coarse) = (&mut lo[l], &mut hi[0]);
            extend(&coarse.op, &coarse.ghost, &coarse.x, &mut coarse.t, false);
            prolong(
                &coarse.op,
                &coarse.t,
                &fine.op,
                &mut fine.x,
                Prolong::AddCorrection,
            );
            smooth(
                &fine.op,
                &fine.inv,
                &fine.b,
                &mut fine.x,
                &mut fine.t,
                p.smoother,
                p.post_sweeps,
                true,
            );
        }
    }

    /// Full multigrid (Briggs et al., ch. 3): restrict the right-hand side and the boundary values to every
    /// level, solve the coarsest, then on each finer level interpolate the solution and run one V-cycle.
    pub(super) fn full_multigrid(&mut self) {
        let p = self.params;
        let last = self.levels.len() - 1;
        for l in 0..last {
            let (lo, hi) = self.levels.split_at_mut(l + 1);
            let (fine, coarse) = (&lo[l], &mut hi[0]);
            restrict_to(&fine.op, Fine::Field(&fine.b), coarse, p.restriction);
            restrict_boundary(&fine.op, &fine.x, &coarse.op, &mut coarse.x);
        }
        {
            let c = &mut self.levels[last];
            solve_coarsest(&c.op, &c.inv, &c.b, &mut c.x, &mut c.t, p.coarsest_sweeps);
        }
        let mode = Prolong::Replace {
            boundary_too: !p.preserve_boundary,
        };
        for l in (0..last).rev() {
            let (lo, hi) = self.levels.split_at_mut(l + 1);
            let (fine, coarse) = (&mut lo[l], &mut hi[0]);
            extend(&coarse.op, &coarse.ghost, &coarse.x, &mut coarse.t, true);
            prolong(&coarse.op, &coarse.t, &fine.op, &mut fine.x, mode);
            self.vcycle_from(l, 0);
        }
    }
}
