//! The resolved `scene.toml` a run writes: the scene with every default filled in and every override
//! applied, so that `eddies run` on it repeats the run.

use toml_edit::{DocumentMut, Item};

use crate::scene::{Method, Scene};

/// Why the resolved scene could not be written as TOML (a bug: a checked scene always serialises).
#[derive(Debug, thiserror::Error)]
pub enum ResolvedSceneError {
    /// The scene did not serialise.
    #[error("cannot write the resolved scene: {0}")]
    Write(#[source] toml::ser::Error),
    /// Its serialisation did not parse back as a TOML document.
    #[error("cannot re-read the resolved scene: {0}")]
    Reread(#[source] toml_edit::TomlError),
}

/// The resolved scene as TOML that parses back to the same [`Scene`] as far as its method reads it: the
/// parameter section of its method only (the others' stay at their defaults), shapes as inline tables, and a
/// comment header.
pub fn scene_toml(scene: &Scene, header: &str) -> Result<String, ResolvedSceneError> {
    let text = toml::to_string(scene).map_err(ResolvedSceneError::Write)?;
    let mut doc: DocumentMut = text.parse().map_err(ResolvedSceneError::Reread)?;
    for section in [Method::Reint, Method::Flip, Method::Vpm] {
        if section != scene.method {
            doc.remove(section.name());
        }
    }
    for list in ["region", "obstacle", "emitter", "sink"] {
        if let Some(Item::ArrayOfTables(tables)) = doc.get_mut(list) {
            for t in tables.iter_mut() {
                if let Some(item) = t.get_mut("shape") {
                    item.make_value();
                }
            }
        }
    }
    let comments: String = header.lines().map(|l| format!("# {l}\n")).collect();
    Ok(format!("{comments}\n{doc}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolved_scene_parses_back() {
        let mut scene: Scene = toml::from_str(
            "[[region]]\nshape = { difference = { base = { box = { min = [0.0, 0.0], max = [1.0, 0.5] } }, \
             cut = { sphere = { center = [0.5, 0.5], radius = 0.1 } } } }\n[[emitter]]\n\
             shape = { sphere = { center = [0.5, 0.9], radius = 0.05 } }",
        )
        .unwrap();
        scene.resolve().unwrap();
        let text = scene_toml(&scene, "resolved\nsecond line").unwrap();
        // Only the method's own parameter section is written.
        assert!(text.contains("[reint]") && !text.contains("[flip]") && !text.contains("[vpm]"));
        assert!(text.starts_with("# resolved\n# second line\n"));
        assert!(text.contains("shape = { difference"), "{text}");
        let back: Scene = toml::from_str(&text).unwrap();
        assert_eq!(back, scene);
    }
}
