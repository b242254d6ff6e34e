//! Animations of a run's frames: `animation.gif` or `animation.mp4` in its folder when the run ends
//! (`output.animation`), and any run's folder turned into one by `eddies animate DIR`.
//!
//! GIF: a frame of at most 256 colours keeps them exactly (its own palette); the others share one palette of
//! 256 colours that NeuQuant (Dekker 1994) learns from a few frames spread through the animation. A run's
//! frames share their colour map or substance colours, so one palette serves them all, does not flicker, and
//! is learnt once: the frames then only need each pixel's nearest colour (looked up once per run of equal
//! pixels, a repeated row copied) and LZW compression, done in parallel. The delays are whole hundredths of a second, alternating so that their mean is
//! 1/fps (at most 50 frames per second, the fastest rate viewers play). MP4: H.264 in yuv420p through the
//! `ffmpeg` program, fed raw RGB frames on its standard input; odd sizes are padded by a pixel to even ones,
//! as yuv420p needs. Both are written under a temporary name and renamed, so a reader never sees half a file.

use std::collections::hash_map::{Entry, HashMap};
use std::fs::{self, File};
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use color_quant::NeuQuant;
use image::RgbImage;
use rayon::prelude::*;

use crate::error::CliError;
use crate::keypath::KeyPath;
use crate::load::Loaded;
use crate::output::{GIF_NAME, MP4_NAME};
use crate::scene::{AnimationFormat, BadValue};

/// Frames per second of `eddies animate` when neither `--fps` nor the run's `scene.toml` says.
pub const DEFAULT_FPS: f64 = 30.0;

/// The program MP4 animations are encoded with.
pub const FFMPEG: &str = "ffmpeg";

/// Frames the shared GIF palette is learnt from, evenly spaced through the animation.
const PALETTE_FRAMES: usize = 8;

/// Pixels taken from each of those frames, at most (evenly spaced).
const PALETTE_PIXELS: usize = 1 << 16;

/// NeuQuant's sampling factor (1 slowest and best, 30 fastest): 5 over the ≤ 2¹⁹ pixels learns the palette
/// in about a tenth of a second.
const NEUQUANT_SAMPLING: i32 = 5;

/// Why an animation could not be made.
#[derive(Debug, thiserror::Error)]
pub enum AnimationError {
    /// The folder could not be listed.
    #[error("cannot read the folder {}: {source}", .dir.display())]
    Folder {
        /// The folder.
        dir: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// The folder holds no `frame_NNNNN.png`.
    #[error("{} holds no frames (frame_NNNNN.png)", .0.display())]
    NoFrames(PathBuf),
    /// A frame could not be read as an image.
    #[error("cannot read the frame {}: {source}", .path.display())]
    Frame {
        /// The frame.
        path: PathBuf,
        /// The decoder's reason.
        source: image::ImageError,
    },
    /// A frame's size differs from the first's.
    #[error("{} is {}×{} pixels but {} is {}×{}: the frames of an animation must have one size",
        .path.display(), .size.0, .size.1, .first.display(), .first_size.0, .first_size.1)]
    Sizes {
        /// The frame that differs.
        path: PathBuf,
        /// Its width and height.
        size: (u32, u32),
        /// The first frame.
        first: PathBuf,
        /// Its width and height.
        first_size: (u32, u32),
    },
    /// Frames too large for a GIF (65535 pixels a side).
    #[error("frames of {0}×{1} pixels are too large for a GIF (at most 65535 a side)")]
    TooLarge(u32, u32),
    /// A frame rate that is not a positive number.
    #[error("the frame rate {0} is not a positive number")]
    Fps(f64),
    /// The encoder program is not on PATH.
    #[error("MP4 animations need the program `{0}`, which is not on PATH")]
    MissingProgram(&'static str),
    /// The GIF encoder failed (its output could not be written).
    #[error("cannot write {}: {source}", .path.display())]
    Gif {
        /// The animation.
        path: PathBuf,
        /// The encoder's reason.
        source: gif::EncodingError,
    },
    /// The animation could not be written.
    #[error("cannot write {}: {source}", .path.display())]
    Write {
        /// The animation.
        path: PathBuf,
        /// The operating system's reason.
        source: io::Error,
    },
    /// ffmpeg failed.
    #[error("`{FFMPEG}` failed ({status}) writing {}: {message}", .path.display())]
    Ffmpeg {
        /// The animation.
        path: PathBuf,
        /// Its exit status.
        status: String,
        /// What it printed.
        message: String,
    },
}

impl From<AnimationError> for CliError {
    fn from(e: AnimationError) -> Self {
        match e {
            AnimationError::Folder { .. }
            | AnimationError::NoFrames(_)
            | AnimationError::Frame { .. }
            | AnimationError::Sizes { .. }
            | AnimationError::TooLarge(..)
            | AnimationError::Fps(_) => CliError::input(
                e.to_string(),
                vec!["  name the output folder of a run (it holds frame_NNNNN.png)".into()],
            ),
            AnimationError::MissingProgram(program) => CliError::input(
                e.to_string(),
                vec![format!(
                    "  install {program}, or make a GIF (--format gif, output.animation = \"gif\")"
                )],
            ),
            e => CliError::other(e.to_string()),
        }
    }
}

/// What was written.
#[derive(Clone, Debug, PartialEq)]
pub struct Written {
    /// The animation file.
    pub path: PathBuf,
    /// Frames in it.
    pub frames: usize,
    /// Their width and height (pixels).
    pub size: (u32, u32),
}

/// The file name of a run's animation: `animation.gif` or `animation.mp4`; `None` for none.
pub fn file_name(format: AnimationFormat) -> Option<&'static str> {
    match format {
        AnimationFormat::None => None,
        AnimationFormat::Gif => Some(GIF_NAME),
        AnimationFormat::Mp4 => Some(MP4_NAME),
    }
}

/// The program `name` on PATH, if there is one.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let exe = format!("{name}{}", std::env::consts::EXE_SUFFIX);
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(&exe))
        .find(|p| p.is_file())
}

/// Refuses a scene whose `output.animation` needs a program that is not on PATH, at that key, before
/// anything runs.
pub fn check_encoder(loaded: &Loaded) -> Result<(), CliError> {
    if loaded.scene.output.animation == AnimationFormat::Mp4 && find_program(FFMPEG).is_none() {
        let key = KeyPath::root().key("output").key("animation");
        let mut e = loaded.locator.error(BadValue::new(
            key,
            format!("\"mp4\" needs the program `{FFMPEG}`, which is not on PATH"),
            "\"none\", \"gif\", or \"mp4\" with ffmpeg installed",
        ));
        e.context.push(format!(
            "  install {FFMPEG}, or set output.animation = \"gif\""
        ));
        return Err(e.into());
    }
    Ok(())
}

/// The frame rate a run in `dir` recorded in its `scene.toml` (`time.fps`), if it did.
pub fn recorded_fps(dir: &Path) -> Option<f64> {
    let text = fs::read_to_string(dir.join("scene.toml")).ok()?;
    let scene: toml::Table = text.parse().ok()?;
    let fps = scene.get("time")?.get("fps")?;
    fps.as_float()
        .or_else(|| fps.as_integer().map(|n| n as f64))
        .filter(|f| f.is_finite() && *f > 0.0)
}

/// The frames `frame_NNNNN.png` in `dir`, in order.
pub fn frames_in(dir: &Path) -> Result<Vec<PathBuf>, AnimationError> {
    let folder = |source| AnimationError::Folder {
        dir: dir.to_path_buf(),
        source,
    };
    let mut frames = Vec::new();
    for entry in fs::read_dir(dir).map_err(folder)? {
        let entry = entry.map_err(folder)?;
        let name = entry.file_name();
        let number = name
            .to_str()
            .and_then(|n| n.strip_prefix("frame_"))
            .and_then(|n| n.strip_suffix(".png"))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u64>().ok());
        if let Some(number) = number {
            frames.push((number, entry.path()));
        }
    }
    if frames.is_empty() {
        return Err(AnimationError::NoFrames(dir.to_path_buf()));
    }
    frames.sort();
    Ok(frames.into_iter().map(|(_, p)| p).collect())
}

/// Writes the frames of `dir` as an animation of `format` at `fps` to `path`.
pub fn animate(
    dir: &Path,
    format: AnimationFormat,
    fps: f64,
    path: &Path,
) -> Result<Option<Written>, AnimationError> {
    if !(fps.is_finite() && fps > 0.0) {
        return Err(AnimationError::Fps(fps));
    }
    match format {
        AnimationFormat::None => Ok(None),
        AnimationFormat::Gif => write_gif(&frames_in(dir)?, fps, path).map(Some),
        AnimationFormat::Mp4 => {
            let ffmpeg = find_program(FFMPEG).ok_or(AnimationError::MissingProgram(FFMPEG))?;
            write_mp4(&ffmpeg, &frames_in(dir)?, fps, path).map(Some)
        }
    }
}

/// Reads the frames in `batch` in parallel, checking each against the first frame's size.
fn read_batch(
    batch: &[PathBuf],
    first: &Path,
    size: Option<(u32, u32)>,
) -> Result<Vec<image::RgbImage>, AnimationError> {
    batch
        .par_iter()
        .map(|path| {
            let img = image::open(path)
                .map_err(|source| AnimationError::Frame {
                    path: path.clone(),
                    source,
                })?
                .into_rgb8();
            match size {
                Some(s) if img.dimensions() != s => Err(AnimationError::Sizes {
                    path: path.clone(),
                    size: img.dimensions(),
                    first: first.to_path_buf(),
                    first_size: s,
                }),
                _ => Ok(img),
            }
        })
        .collect()
}

/// The frames in batches of a few per thread: read (and quantised) in parallel, written in order, with a
/// bounded number of frames in memory.
fn batches(frames: &[PathBuf]) -> std::slice::Chunks<'_, PathBuf> {
    frames.chunks(2 * rayon::current_num_threads().max(1))
}

/// The size of the first frame.
fn first_size(frames: &[PathBuf]) -> Result<(u32, u32), AnimationError> {
    let first = &frames[0];
    Ok(read_batch(std::slice::from_ref(first), first, None)?[0].dimensions())
}

/// The delay of frame `k` at `fps` (hundredths of a second): whole hundredths whose running sum stays
/// within half a hundredth of k/fps, at least 2 (faster GIFs are slowed down by viewers).
pub fn gif_delay(k: usize, fps: f64) -> u16 {
    let at = |k: usize| (100.0 * k as f64 / fps).round() as i64;
    (at(k + 1) - at(k)).clamp(2, u16::MAX as i64) as u16
}

fn write_gif(frames: &[PathBuf], fps: f64, path: &Path) -> Result<Written, AnimationError> {
    let size = first_size(frames)?;
    let (w, h) = (
        u16::try_from(size.0).map_err(|_| AnimationError::TooLarge(size.0, size.1))?,
        u16::try_from(size.1).map_err(|_| AnimationError::TooLarge(size.0, size.1))?,
    );
    let write_err = |source| AnimationError::Write {
        path: path.to_path_buf(),
        source,
    };
    let gif_err = |source| AnimationError::Gif {
        path: path.to_path_buf(),
        source,
    };
    let shared = shared_palette(frames, size)?;
    let tmp = temporary(path);
    let result = (|| {
        let file = File::create(&tmp).map_err(write_err)?;
        let palette = shared.color_map_rgb();
        let mut encoder =
            gif::Encoder::new(BufWriter::new(file), w, h, &palette).map_err(gif_err)?;
        encoder.set_repeat(gif::Repeat::Infinite).map_err(gif_err)?;
        let mut k = 0;
        for batch in batches(frames) {
            let images = read_batch(batch, &frames[0], Some(size))?;
            let encoded: Vec<gif::Frame> = images
                .par_iter()
                .map(|img| gif_frame(img, &shared))
                .collect();
            for mut frame in encoded {
                frame.delay = gif_delay(k, fps);
                encoder
                    .write_lzw_pre_encoded_frame(&frame)
                    .map_err(gif_err)?;
                k += 1;
            }
        }
        let file = encoder.into_inner().map_err(gif_err)?;
        file.into_inner()
            .map_err(|e| write_err(e.into_error()))?
            .sync_all()
            .map_err(write_err)?;
        fs::rename(&tmp, path).map_err(write_err)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map(|()| Written {
        path: path.to_path_buf(),
        frames: frames.len(),
        size,
    })
}

/// The palette the frames of more than 256 colours share, learnt by NeuQuant from pixels of up to
/// [`PALETTE_FRAMES`] frames spread through the animation.
fn shared_palette(frames: &[PathBuf], size: (u32, u32)) -> Result<NeuQuant, AnimationError> {
    let n = frames.len();
    let m = n.min(PALETTE_FRAMES);
    let mut picks: Vec<PathBuf> = (0..m)
        .map(|i| frames[i * (n - 1) / (m - 1).max(1)].clone())
        .collect();
    picks.dedup();
    let images = read_batch(&picks, &frames[0], Some(size))?;
    let pixels = size.0 as usize * size.1 as usize;
    // An odd stride, so that the samples do not line up with the columns of an enlarged picture.
    let stride = (pixels / PALETTE_PIXELS).max(1) | 1;
    let rgba: Vec<u8> = images
        .iter()
        .flat_map(|img| img.pixels().step_by(stride))
        .flat_map(|p| [p[0], p[1], p[2], 255])
        .collect();
    Ok(NeuQuant::new(NEUQUANT_SAMPLING, 256, &rgba))
}

/// `img` as a GIF frame, LZW-compressed: its own palette if it has at most 256 colours, else indices into
/// the `shared` palette.
fn gif_frame(img: &RgbImage, shared: &NeuQuant) -> gif::Frame<'static> {
    let (w, h) = (img.width() as u16, img.height() as u16);
    let mut frame = match exact_palette(img) {
        Some((palette, indices)) => gif::Frame::from_palette_pixels(w, h, indices, palette, None),
        None => {
            let indices = index_pixels(img, |c| shared.index_of(&[c[0], c[1], c[2], 255]) as u8);
            gif::Frame::from_indexed_pixels(w, h, indices, None)
        }
    };
    frame.make_lzw_pre_encoded();
    frame
}

/// The palette of an image with at most 256 colours (RGB triples) and its pixels' indices into it; `None`
/// for more colours.
fn exact_palette(img: &RgbImage) -> Option<(Vec<u8>, Vec<u8>)> {
    let mut colours: HashMap<[u8; 3], u8> = HashMap::new();
    let mut last = None;
    for p in img.pixels() {
        if last != Some(p.0) {
            let n = colours.len();
            if let Entry::Vacant(e) = colours.entry(p.0) {
                e.insert(u8::try_from(n).ok()?);
            }
            last = Some(p.0);
        }
    }
    let mut palette = vec![0; 3 * colours.len()];
    for (c, &i) in &colours {
        palette[3 * i as usize..3 * i as usize + 3].copy_from_slice(c);
    }
    Some((palette, index_pixels(img, |c| colours[&c])))
}

/// The palette index of every pixel by `index`, called once per run of equal pixels along a row; a row equal
/// to the one above is copied.
fn index_pixels(img: &RgbImage, index: impl Fn([u8; 3]) -> u8) -> Vec<u8> {
    let (w, h) = (img.width() as usize, img.height() as usize);
    let raw = img.as_raw();
    let mut out = vec![0u8; w * h];
    for y in 0..h {
        let row = &raw[3 * w * y..3 * w * (y + 1)];
        if y > 0 && row == &raw[3 * w * (y - 1)..3 * w * y] {
            out.copy_within(w * (y - 1)..w * y, w * y);
            continue;
        }
        let mut last: Option<([u8; 3], u8)> = None;
        for (x, c) in row.chunks_exact(3).enumerate() {
            let c = [c[0], c[1], c[2]];
            let i = match last {
                Some((prev, i)) if prev == c => i,
                _ => index(c),
            };
            last = Some((c, i));
            out[w * y + x] = i;
        }
    }
    out
}

fn write_mp4(
    ffmpeg: &Path,
    frames: &[PathBuf],
    fps: f64,
    path: &Path,
) -> Result<Written, AnimationError> {
    let size = first_size(frames)?;
    let write_err = |source| AnimationError::Write {
        path: path.to_path_buf(),
        source,
    };
    let tmp = temporary(path);
    let mut child = Command::new(ffmpeg)
        .args(["-hide_banner", "-loglevel", "error", "-y"])
        .args(["-f", "rawvideo", "-pix_fmt", "rgb24"])
        .args(["-video_size", &format!("{}x{}", size.0, size.1)])
        .args(["-framerate", &fps.to_string(), "-i", "-"])
        .args(["-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2"])
        .args([
            "-c:v",
            "libx264",
            "-pix_fmt",
            "yuv420p",
            "-movflags",
            "+faststart",
        ])
        .args(["-f", "mp4"])
        .arg(&tmp)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(write_err)?;
    // ffmpeg's messages are read while it runs, so that a full pipe never stalls it.
    let mut stderr = child.stderr.take();
    let messages = std::thread::spawn(move || {
        let mut text = String::new();
        if let Some(s) = stderr.as_mut() {
            let _ = s.read_to_string(&mut text);
        }
        text
    });
    let mut fed = Ok(());
    if let Some(mut stdin) = child.stdin.take() {
        for batch in batches(frames) {
            fed = read_batch(batch, &frames[0], Some(size)).and_then(|images| {
                images
                    .iter()
                    .try_for_each(|img| stdin.write_all(img.as_raw()))
                    .map_err(write_err)
            });
            if fed.is_err() {
                break;
            }
        }
    }
    let status = child.wait().map_err(write_err)?;
    let message = messages.join().unwrap_or_default();
    let result = if !status.success() {
        Err(AnimationError::Ffmpeg {
            path: path.to_path_buf(),
            status: status.to_string(),
            message: message.trim().to_string(),
        })
    } else {
        fed.and_then(|()| fs::rename(&tmp, path).map_err(write_err))
    };
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map(|()| Written {
        path: path.to_path_buf(),
        frames: frames.len(),
        size,
    })
}

/// A temporary name beside `path`, as [`crate::output::write_atomic`] uses.
fn temporary(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("animation");
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gif_delays_average_to_the_frame_rate() {
        for fps in [24.0, 30.0, 50.0, 12.5] {
            let total: u32 = (0..300).map(|k| gif_delay(k, fps) as u32).sum();
            let want = 300.0 * 100.0 / fps;
            assert!((total as f64 - want).abs() <= 0.5, "{fps} fps: {total}");
        }
        assert!((0..10).all(|k| gif_delay(k, 60.0) == 2), "at most 50 fps");
    }

    #[test]
    fn few_colours_are_kept_exactly_and_many_are_approximated() {
        let stripes = RgbImage::from_fn(40, 6, |x, _| image::Rgb([(x * 6) as u8, 7, 200]));
        let (palette, indices) = exact_palette(&stripes).expect("40 colours");
        for (p, &i) in stripes.pixels().zip(&indices) {
            assert_eq!(&palette[3 * i as usize..3 * i as usize + 3], &p.0);
        }
        // A colour map's ramp in 1024 steps, as colour-mapped frames show it: NeuQuant's 256 colours come
        // within a level or two of each.
        let scale = crate::render::ColorScale {
            map: crate::scene::Colormap::Viridis,
            lo: 0.0,
            hi: 1.0,
        };
        let ramp = RgbImage::from_fn(1024, 4, |x, _| image::Rgb(scale.rgb_at(x as f64 / 1023.0)));
        assert!(exact_palette(&ramp).is_none());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("frame_00000.png");
        ramp.save(&path).unwrap();
        let shared = shared_palette(&[path], ramp.dimensions()).unwrap();
        let frame = gif_frame(&ramp, &shared);
        assert!(frame.palette.is_none(), "the shared palette");
        let mut options = gif::DecodeOptions::new();
        options.set_color_output(gif::ColorOutput::RGBA);
        let mut bytes = Vec::new();
        {
            let palette = shared.color_map_rgb();
            let mut enc = gif::Encoder::new(&mut bytes, 1024, 4, &palette).unwrap();
            enc.write_lzw_pre_encoded_frame(&frame).unwrap();
        }
        let mut dec = options.read_info(bytes.as_slice()).unwrap();
        let back = dec.read_next_frame().unwrap().unwrap();
        let err: u32 = ramp
            .pixels()
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .zip(back.buffer.iter())
            .map(|(a, &b)| (a as i32 - b as i32).unsigned_abs())
            .sum();
        let mean = err as f64 / (1024.0 * 4.0 * 3.0);
        assert!(mean < 2.0, "mean error {mean}");
    }

    #[test]
    fn frames_are_listed_in_order_and_others_ignored() {
        let dir = tempfile::tempdir().unwrap();
        for name in [
            "frame_00010.png",
            "frame_00002.png",
            "frame_.png",
            "frame_00003.png.tmp-1",
            "stats.jsonl",
        ] {
            fs::write(dir.path().join(name), b"").unwrap();
        }
        let names: Vec<String> = frames_in(dir.path())
            .unwrap()
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["frame_00002.png", "frame_00010.png"]);
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            frames_in(empty.path()),
            Err(AnimationError::NoFrames(_))
        ));
    }

    #[test]
    fn frames_of_different_sizes_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        image::RgbImage::new(8, 8)
            .save(dir.path().join("frame_00000.png"))
            .unwrap();
        image::RgbImage::new(8, 6)
            .save(dir.path().join("frame_00001.png"))
            .unwrap();
        let out = dir.path().join("animation.gif");
        let e = animate(dir.path(), AnimationFormat::Gif, 30.0, &out).unwrap_err();
        assert!(matches!(e, AnimationError::Sizes { .. }), "{e}");
        assert!(
            e.to_string().contains("frame_00001.png is 8×6 pixels"),
            "{e}"
        );
        assert!(!out.exists(), "nothing is left behind");
        assert_eq!(fs::read_dir(dir.path()).unwrap().count(), 2);
    }

    #[test]
    fn the_recorded_frame_rate_is_read_from_scene_toml() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(recorded_fps(dir.path()), None);
        fs::write(dir.path().join("scene.toml"), "[time]\nfps = 24.0\n").unwrap();
        assert_eq!(recorded_fps(dir.path()), Some(24.0));
        fs::write(dir.path().join("scene.toml"), "[time]\nfps = 12\n").unwrap();
        assert_eq!(recorded_fps(dir.path()), Some(12.0));
    }
}
