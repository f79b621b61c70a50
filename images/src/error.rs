//! Why an image value could not be decoded or the options refused.

/// The error of decoding one image value. It names no record: the caller knows
/// which record the value is and says so (the Python package names its index
/// and key).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    /// Neither a JPEG nor a PNG (by the first bytes).
    #[error("not a JPEG or PNG image (it starts with {0})")]
    UnknownFormat(String),
    /// libjpeg refused the data (its own message).
    #[error("corrupt JPEG: {0}")]
    Jpeg(String),
    /// A JPEG of a colour space this crate does not convert to RGB.
    #[error("a {0} image: only greyscale, YCbCr and RGB JPEGs and PNGs are decoded")]
    UnsupportedColorSpace(&'static str),
    /// The PNG decoder refused the data.
    #[error("corrupt PNG: {0}")]
    Png(#[from] png::DecodingError),
    /// Zero-sized, or more pixels than [`crate::MAX_PIXELS`].
    #[error("an image of {width} x {height} pixels: more than {max} pixels, or none", max = crate::MAX_PIXELS)]
    Size {
        /// Width the image declares.
        width: u64,
        /// Height the image declares.
        height: u64,
    },
    /// The resizer refused the geometry (a bug if it happens: boxes are checked).
    #[error("resizing failed: {0}")]
    Resize(String),
}

/// Options that make no sense, named by the option.
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("`{option}`: {reason}")]
pub struct OptionsError {
    /// The option, as the Python keyword names it.
    pub option: &'static str,
    /// What is wrong with its value.
    pub reason: String,
}
