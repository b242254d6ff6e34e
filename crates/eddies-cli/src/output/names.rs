//! The names of the per-frame outputs (`frame_NNNNN.png`, `particles_NNNNN.npy`, `field_NAME_NNNNN.npy`,
//! the files for other tools and the checkpoints; README, "Outputs"), and the test that tells a file of ours
//! from any other.

/// `frame_NNNNN.png`.
pub fn frame_name(frame: usize) -> String {
    format!("frame_{frame:05}.png")
}

/// `particles_NNNNN.npy`.
pub fn particles_name(frame: usize) -> String {
    format!("particles_{frame:05}.npy")
}

/// `field_NAME_NNNNN.npy`.
pub fn field_name(name: &str, frame: usize) -> String {
    format!("field_{name}_{frame:05}.npy")
}

/// `STEM_NNNNN.EXT`: the per-frame files for other tools (`grid` `.vti`; `particles` and `tracers` `.vtp`
/// and `.ply`; `surface` `.ply` and `.obj`; `volume` `.vdb`), and `checkpoint_NNNNN.ckpt` with NNNNN the
/// frames done.
pub fn numbered_name(stem: &str, number: usize, ext: &str) -> String {
    format!("{stem}_{number:05}.{ext}")
}

/// The VTK collection of a run's `.vti` and `.vtp` files.
pub const SERIES_NAME: &str = "series.pvd";

/// A run's animation (`output.animation = "gif"`).
pub const GIF_NAME: &str = "animation.gif";

/// A run's animation (`output.animation = "mp4"`).
pub const MP4_NAME: &str = "animation.mp4";

/// The numbered files of a run: stem and extension.
const NUMBERED: &[(&str, &str)] = &[
    ("frame", "png"),
    ("particles", "npy"),
    ("grid", "vti"),
    ("particles", "vtp"),
    ("tracers", "vtp"),
    ("particles", "ply"),
    ("tracers", "ply"),
    ("surface", "ply"),
    ("surface", "obj"),
    ("volume", "vdb"),
    ("checkpoint", "ckpt"),
];

/// Whether `name` is a file of an earlier run of ours that a new run replaces: a per-frame output, a
/// checkpoint, the VTK collection or the animation.
pub(super) fn is_frame_output(name: &str) -> bool {
    let numbered =
        |stem: &str| stem.len() >= 5 && stem[stem.len() - 5..].bytes().all(|b| b.is_ascii_digit());
    if [SERIES_NAME, GIF_NAME, MP4_NAME].contains(&name) {
        return true;
    }
    for (stem, ext) in NUMBERED {
        if let Some(number) = name
            .strip_prefix(stem)
            .and_then(|s| s.strip_prefix('_'))
            .and_then(|s| s.strip_suffix(ext))
            .and_then(|s| s.strip_suffix('.'))
        {
            if number.len() == 5 && numbered(number) {
                return true;
            }
        }
    }
    if let Some(stem) = name
        .strip_prefix("field_")
        .and_then(|s| s.strip_suffix(".npy"))
    {
        return stem.len() > 6 && numbered(stem) && stem.as_bytes()[stem.len() - 6] == b'_';
    }
    false
}

/// The frames done of a checkpoint file's name (`checkpoint_NNNNN.ckpt`).
pub fn checkpoint_number(name: &str) -> Option<usize> {
    let digits = name.strip_prefix("checkpoint_")?.strip_suffix(".ckpt")?;
    (digits.len() >= 5 && digits.bytes().all(|b| b.is_ascii_digit()))
        .then(|| digits.parse().ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_outputs_are_recognised() {
        for ok in [
            "frame_00000.png",
            "particles_00012.npy",
            "field_mass_00003.npy",
            "field_a_b_99999.npy",
            "grid_00001.vti",
            "tracers_00002.ply",
            "surface_00003.obj",
            "volume_00004.vdb",
            "checkpoint_00010.ckpt",
            "series.pvd",
            "animation.gif",
            "animation.mp4",
        ] {
            assert!(is_frame_output(ok), "{ok}");
        }
        for keep in [
            "frame_0000.png",
            "frame_00000.jpg",
            "notes.txt",
            "stats.jsonl",
            "field_00001.npy",
            "frame_abcde.png",
            "grid_0001.vti",
            "surface_00001.stl",
            "checkpoint_00010.ckpt.bak",
        ] {
            assert!(!is_frame_output(keep), "{keep}");
        }
    }

    #[test]
    fn checkpoint_numbers_are_read_from_names() {
        assert_eq!(
            checkpoint_number(&numbered_name("checkpoint", 12, "ckpt")),
            Some(12)
        );
        assert_eq!(checkpoint_number("checkpoint_123456.ckpt"), Some(123456));
        assert_eq!(checkpoint_number("checkpoint_0012.ckpt"), None);
        assert_eq!(checkpoint_number("checkpoint_00012.vdb"), None);
    }
}
