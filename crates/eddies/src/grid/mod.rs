//! Cell-centred and staggered (MAC) grids in 2D and 3D.
