//! A strict PLY reader: any element and property layout, in ASCII or binary of either byte order, with every
//! deviation from the format an error (meant for checking files, eddies' own and others', in tests).

use super::PlyError;

/// A whole PLY file, values widened to f64 (which holds every PLY type exactly).
#[derive(Clone, Debug, PartialEq)]
pub struct Ply {
    /// The encoding of the data.
    pub format: Format,
    /// The `comment` lines' text, in order.
    pub comments: Vec<String>,
    /// The `obj_info` lines' text, in order.
    pub obj_info: Vec<String>,
    /// The elements in file order.
    pub elements: Vec<Element>,
}

/// The encodings of PLY data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `ascii`: one element instance per line.
    Ascii,
    /// `binary_little_endian`.
    BinaryLittleEndian,
    /// `binary_big_endian`.
    BinaryBigEndian,
}

/// An element: its name, its number of instances and one column per property.
#[derive(Clone, Debug, PartialEq)]
pub struct Element {
    /// The element's name (`vertex`, `face`, ...).
    pub name: String,
    /// Number of instances.
    pub count: usize,
    /// Properties in header order.
    pub properties: Vec<Property>,
}

/// A property and its values, one per element instance.
#[derive(Clone, Debug, PartialEq)]
pub struct Property {
    /// The property's name.
    pub name: String,
    /// Its type and values.
    pub data: PropertyData,
}

/// A property's type and values.
#[derive(Clone, Debug, PartialEq)]
pub enum PropertyData {
    /// One value per instance.
    Scalar {
        /// The stored type.
        ty: ScalarType,
        /// The values.
        values: Vec<f64>,
    },
    /// A list per instance.
    List {
        /// The type of the list's length.
        count: ScalarType,
        /// The type of the items.
        item: ScalarType,
        /// The lists.
        values: Vec<Vec<f64>>,
    },
}

/// The PLY scalar types (each also has a sized name: `int8` ... `float64`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarType {
    /// `char`, `int8`.
    I8,
    /// `uchar`, `uint8`.
    U8,
    /// `short`, `int16`.
    I16,
    /// `ushort`, `uint16`.
    U16,
    /// `int`, `int32`.
    I32,
    /// `uint`, `uint32`.
    U32,
    /// `float`, `float32`.
    F32,
    /// `double`, `float64`.
    F64,
}

impl ScalarType {
    fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "char" | "int8" => Self::I8,
            "uchar" | "uint8" => Self::U8,
            "short" | "int16" => Self::I16,
            "ushort" | "uint16" => Self::U16,
            "int" | "int32" => Self::I32,
            "uint" | "uint32" => Self::U32,
            "float" | "float32" => Self::F32,
            "double" | "float64" => Self::F64,
            _ => return None,
        })
    }

    /// Bytes in binary data.
    pub fn size(self) -> usize {
        match self {
            Self::I8 | Self::U8 => 1,
            Self::I16 | Self::U16 => 2,
            Self::I32 | Self::U32 | Self::F32 => 4,
            Self::F64 => 8,
        }
    }

    fn is_integer(self) -> bool {
        !matches!(self, Self::F32 | Self::F64)
    }

    /// The value of `bytes` (exactly [`ScalarType::size`] of them).
    fn decode(self, b: &[u8], little: bool) -> f64 {
        macro_rules! num {
            ($t:ty) => {{
                let a = b.try_into().unwrap_or_default();
                f64::from(if little {
                    <$t>::from_le_bytes(a)
                } else {
                    <$t>::from_be_bytes(a)
                })
            }};
        }
        match self {
            Self::I8 => num!(i8),
            Self::U8 => num!(u8),
            Self::I16 => num!(i16),
            Self::U16 => num!(u16),
            Self::I32 => num!(i32),
            Self::U32 => num!(u32),
            Self::F32 => num!(f32),
            Self::F64 => num!(f64),
        }
    }

    /// The value of an ASCII token, if it is a number of this type.
    fn parse_token(self, token: &str) -> Option<f64> {
        let int = |lo: i64, hi: i64| {
            token
                .parse::<i64>()
                .ok()
                .filter(|v| (lo..=hi).contains(v))
                .map(|v| v as f64)
        };
        match self {
            Self::I8 => int(i8::MIN.into(), i8::MAX.into()),
            Self::U8 => int(0, u8::MAX.into()),
            Self::I16 => int(i16::MIN.into(), i16::MAX.into()),
            Self::U16 => int(0, u16::MAX.into()),
            Self::I32 => int(i32::MIN.into(), i32::MAX.into()),
            Self::U32 => int(0, u32::MAX.into()),
            Self::F32 => token.parse::<f32>().ok().map(f64::from),
            Self::F64 => token.parse::<f64>().ok(),
        }
    }
}

impl Ply {
    /// The element named `name`.
    pub fn element(&self, name: &str) -> Option<&Element> {
        self.elements.iter().find(|e| e.name == name)
    }
}

impl Element {
    /// The property named `name`.
    pub fn property(&self, name: &str) -> Option<&Property> {
        self.properties.iter().find(|p| p.name == name)
    }

    /// The values of the scalar property `name`.
    pub fn scalars(&self, name: &str) -> Option<&[f64]> {
        match &self.property(name)?.data {
            PropertyData::Scalar { values, .. } => Some(values),
            PropertyData::List { .. } => None,
        }
    }

    /// The lists of the list property `name`.
    pub fn lists(&self, name: &str) -> Option<&[Vec<f64>]> {
        match &self.property(name)?.data {
            PropertyData::List { values, .. } => Some(values),
            PropertyData::Scalar { .. } => None,
        }
    }
}

/// Reads a whole PLY file.
///
/// # Errors
/// [`PlyError::Magic`] if it does not start with `ply`; [`PlyError::Header`] for an unknown format or
/// version, an unknown line or type, a property outside an element, a non-integer list count type or a
/// repeated name; [`PlyError::Truncated`] and [`PlyError::Value`] for data that ends early or does not
/// match its types; [`PlyError::TrailingBytes`] for data after the last element (in ASCII, anything but
/// whitespace).
pub fn read(bytes: &[u8]) -> Result<Ply, PlyError> {
    let (mut ply, body) = read_header(bytes)?;
    match ply.format {
        Format::Ascii => read_ascii(&mut ply.elements, body)?,
        Format::BinaryLittleEndian => read_binary(&mut ply.elements, body, true)?,
        Format::BinaryBigEndian => read_binary(&mut ply.elements, body, false)?,
    }
    Ok(ply)
}

/// The header's description with empty columns, and the data after `end_header`.
fn read_header(bytes: &[u8]) -> Result<(Ply, &[u8]), PlyError> {
    let mut rest = bytes;
    let mut next_line = || -> Option<&[u8]> {
        let end = rest.iter().position(|&b| b == b'\n')?;
        let line = &rest[..end];
        rest = &rest[end + 1..];
        Some(line.strip_suffix(b"\r").unwrap_or(line))
    };
    if next_line() != Some(b"ply") {
        return Err(PlyError::Magic);
    }
    let mut ply = Ply {
        format: Format::Ascii,
        comments: Vec::new(),
        obj_info: Vec::new(),
        elements: Vec::new(),
    };
    let mut number = 1;
    let mut format = None;
    loop {
        number += 1;
        let bad = |reason: String| PlyError::Header {
            line: number,
            reason,
        };
        let line = next_line().ok_or_else(|| bad("the header has no `end_header`".into()))?;
        let line = std::str::from_utf8(line).map_err(|_| bad("not ASCII".into()))?;
        let (keyword, args) = line.split_once(' ').unwrap_or((line, ""));
        let words: Vec<&str> = args.split_whitespace().collect();
        if format.is_none() && keyword != "format" {
            return Err(bad("the second line must be `format ...`".into()));
        }
        match (keyword, words.as_slice()) {
            ("format", [f, version]) if format.is_none() => {
                if *version != "1.0" {
                    return Err(bad(format!("PLY version {version}, only 1.0 exists")));
                }
                format = Some(match *f {
                    "ascii" => Format::Ascii,
                    "binary_little_endian" => Format::BinaryLittleEndian,
                    "binary_big_endian" => Format::BinaryBigEndian,
                    _ => return Err(bad(format!("unknown format `{f}`"))),
                });
            }
            ("comment", _) => ply.comments.push(args.to_string()),
            ("obj_info", _) => ply.obj_info.push(args.to_string()),
            ("element", [name, count]) => {
                if ply.element(name).is_some() {
                    return Err(bad(format!("element `{name}` declared twice")));
                }
                let count = count.parse().map_err(|_| bad(format!("count `{count}`")))?;
                ply.elements.push(Element {
                    name: name.to_string(),
                    count,
                    properties: Vec::new(),
                });
            }
            ("property", types_and_name) => {
                let element = ply
                    .elements
                    .last_mut()
                    .ok_or_else(|| bad("a property before any element".into()))?;
                let ty = |t: &str| {
                    ScalarType::parse(t).ok_or_else(|| bad(format!("unknown type `{t}`")))
                };
                let (name, data) = match types_and_name {
                    ["list", count, item, name] => {
                        let count = ty(count)?;
                        if !count.is_integer() {
                            return Err(bad("a list's count must have an integer type".into()));
                        }
                        let (item, values) = (ty(item)?, Vec::new());
                        (
                            name,
                            PropertyData::List {
                                count,
                                item,
                                values,
                            },
                        )
                    }
                    [t, name] if *t != "list" => (
                        name,
                        PropertyData::Scalar {
                            ty: ty(t)?,
                            values: Vec::new(),
                        },
                    ),
                    _ => return Err(bad(format!("malformed property `{args}`"))),
                };
                if element.property(name).is_some() {
                    return Err(bad(format!("property `{name}` declared twice")));
                }
                element.properties.push(Property {
                    name: name.to_string(),
                    data,
                });
            }
            ("end_header", []) => break,
            _ => return Err(bad(format!("unexpected `{line}`"))),
        }
    }
    ply.format = format.unwrap_or(Format::Ascii);
    Ok((ply, rest))
}

/// Fills the columns from binary data.
fn read_binary(elements: &mut [Element], mut data: &[u8], little: bool) -> Result<(), PlyError> {
    for element in elements.iter_mut() {
        // A bound from the data's length, so that a forged count cannot reserve unbounded memory.
        let reserve = element.count.min(data.len());
        for p in &mut element.properties {
            match &mut p.data {
                PropertyData::Scalar { values, .. } => values.reserve(reserve),
                PropertyData::List { values, .. } => values.reserve(reserve),
            }
        }
        for index in 0..element.count {
            let truncated = || PlyError::Truncated {
                element: element.name.clone(),
                index,
            };
            for p in &mut element.properties {
                let mut take = |ty: ScalarType| -> Result<f64, PlyError> {
                    let (b, rest) = data.split_at_checked(ty.size()).ok_or_else(truncated)?;
                    data = rest;
                    Ok(ty.decode(b, little))
                };
                match &mut p.data {
                    PropertyData::Scalar { ty, values } => values.push(take(*ty)?),
                    PropertyData::List {
                        count,
                        item,
                        values,
                    } => {
                        let n = take(*count)?;
                        if n < 0.0 {
                            return Err(PlyError::Value {
                                element: element.name.clone(),
                                index,
                                reason: format!("list `{}` has length {n}", p.name),
                            });
                        }
                        let list = (0..n as usize)
                            .map(|_| take(*item))
                            .collect::<Result<_, _>>()?;
                        values.push(list);
                    }
                }
            }
        }
    }
    if data.is_empty() {
        Ok(())
    } else {
        Err(PlyError::TrailingBytes(data.len()))
    }
}

/// Fills the columns from ASCII data: one line per instance, holding exactly its values.
fn read_ascii(elements: &mut [Element], data: &[u8]) -> Result<(), PlyError> {
    let mut lines = data.split(|&b| b == b'\n');
    for element in elements.iter_mut() {
        for index in 0..element.count {
            let bad = |reason: String| PlyError::Value {
                element: element.name.clone(),
                index,
                reason,
            };
            let line = lines.next().ok_or_else(|| PlyError::Truncated {
                element: element.name.clone(),
                index,
            })?;
            let line = std::str::from_utf8(line).map_err(|_| bad("not ASCII".into()))?;
            let mut tokens = line.split_whitespace();
            if line.trim().is_empty() && !element.properties.is_empty() {
                return Err(PlyError::Truncated {
                    element: element.name.clone(),
                    index,
                });
            }
            for p in &mut element.properties {
                let mut take = |ty: ScalarType| -> Result<f64, PlyError> {
                    let token = tokens
                        .next()
                        .ok_or_else(|| bad(format!("too few values for `{}`", p.name)))?;
                    ty.parse_token(token)
                        .ok_or_else(|| bad(format!("`{token}` is not a {ty:?} for `{}`", p.name)))
                };
                match &mut p.data {
                    PropertyData::Scalar { ty, values } => values.push(take(*ty)?),
                    PropertyData::List {
                        count,
                        item,
                        values,
                    } => {
                        let n = take(*count)?;
                        if n < 0.0 {
                            return Err(bad(format!("list `{}` has length {n}", p.name)));
                        }
                        let list = (0..n as usize)
                            .map(|_| take(*item))
                            .collect::<Result<_, _>>()?;
                        values.push(list);
                    }
                }
            }
            if let Some(extra) = tokens.next() {
                return Err(bad(format!(
                    "unexpected value `{extra}` at the end of the line"
                )));
            }
        }
    }
    let trailing: usize = lines
        .map(|l| l.iter().filter(|b| !b.is_ascii_whitespace()).count())
        .sum();
    if trailing == 0 {
        Ok(())
    } else {
        Err(PlyError::TrailingBytes(trailing))
    }
}
