//! The names of the per-frame outputs (`frame_NNNNN.png`, `particles_NNNNN.npy`, `field_NAME_NNNNN.npy`,
//! README, "Outputs"), and the test that tells a file of ours from any other.

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

/// Whether `name` is a per-frame output of ours (`frame_NNNNN.png`, `particles_NNNNN.npy`,
/// `field_*_NNNNN.npy`).
pub(super) fn is_frame_output(name: &str) -> bool {
    let numbered =
        |stem: &str| stem.len() >= 5 && stem[stem.len() - 5..].bytes().all(|b| b.is_ascii_digit());
    if let Some(stem) = name
        .strip_prefix("frame_")
        .and_then(|s| s.strip_suffix(".png"))
    {
        return stem.len() == 5 && numbered(stem);
    }
    if let Some(stem) = name
        .strip_prefix("particles_")
        .and_then(|s| s.strip_suffix(".npy"))
    {
        return stem.len() == 5 && numbered(stem);
    }
    if let Some(stem) = name
        .strip_prefix("field_")
        .and_then(|s| s.strip_suffix(".npy"))
    {
        return stem.len() > 6 && numbered(stem) && stem.as_bytes()[stem.len() - 6] == b'_';
    }
    false
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
        ] {
            assert!(!is_frame_output(keep), "{keep}");
        }
    }
}
