//! JPEG values through libjpeg-turbo's decoder (as MozJPEG ships it), decoding
//! only what a crop needs: at 1/2, 1/4 or 1/8 scale when the box stays at least
//! the output size there (DCT-domain scaling), only the iMCU columns that cover
//! the box (`jpeg_crop_scanline`), and only its rows (`jpeg_skip_scanlines`
//! above it, nothing read below it).
//!
//! This module is the only FFI of the crate. libjpeg reports a fatal error by
//! calling `error_exit`, which must not return: ours unwinds (a Rust panic with
//! a [`Fatal`] payload, through C code built with `-fexceptions`, which the
//! `C-unwind` ABI allows) to the `catch_unwind` in [`decode`], and the decoder
//! state is destroyed by its `Drop` on the way. Warnings are ignored as Pillow
//! ignores them, except "Premature end of JPEG file": a truncated image is an
//! error, as Pillow makes it one.

use std::ffi::{c_int, c_long, c_ulong, CStr};
use std::mem;
use std::panic::{self, AssertUnwindSafe};

use mozjpeg_sys as ffi;

use crate::crop_box::CropBox;
use crate::error::ImageError;
use crate::region::Region;
use crate::MAX_PIXELS;

/// The most memory libjpeg may take for one image (its own accounting: the
/// coefficient buffers of a progressive image are the large part).
const MAX_MEMORY: c_long = 1 << 30;

/// The payload of the panic `error_exit` unwinds with: libjpeg's message.
struct Fatal(String);

/// libjpeg's error manager, with room for what `emit_message` notices. The
/// library holds a pointer to `manager`, the first field, and ours are cast
/// back from it (`repr(C)` keeps it first).
#[repr(C)]
struct Errors {
    manager: ffi::jpeg_error_mgr,
    truncated: bool,
}

/// The decompressor and its error manager, boxed so the pointers libjpeg keeps
/// (`cinfo.err`) stay valid; destroyed on drop, also while unwinding.
struct Decompressor {
    cinfo: ffi::jpeg_decompress_struct,
    errors: Errors,
    created: bool,
}

impl Drop for Decompressor {
    fn drop(&mut self) {
        if self.created {
            // SAFETY: created by jpeg_CreateDecompress and not destroyed yet;
            // destroying frees every pool, whatever state decoding stopped in.
            unsafe { ffi::jpeg_destroy_decompress(&mut self.cinfo) };
        }
    }
}

/// The text of libjpeg's current message.
fn message(cinfo: &mut ffi::jpeg_common_struct) -> String {
    // SAFETY: `err` is our Errors (set in `decode`), alive while cinfo is; its
    // format_message, set by jpeg_std_error, writes at most 80 bytes (JMSG_LENGTH_MAX)
    // including the NUL into the buffer. The binding declares the buffer
    // shared though C writes it: it is passed as the exclusive one it is.
    unsafe {
        let format = (*cinfo.err).format_message;
        let Some(format) = format else {
            return format!("libjpeg message {}", (*cinfo.err).msg_code);
        };
        let format = mem::transmute::<
            unsafe extern "C-unwind" fn(&mut ffi::jpeg_common_struct, &[u8; 80]),
            unsafe extern "C-unwind" fn(&mut ffi::jpeg_common_struct, &mut [u8; 80]),
        >(format);
        let mut buffer = [0u8; 80];
        format(cinfo, &mut buffer);
        let text = buffer.split(|&b| b == 0).next().unwrap_or_default();
        String::from_utf8_lossy(text).into_owned()
    }
}

/// libjpeg's fatal-error hook: unwinds to `decode` with the message.
extern "C-unwind" fn error_exit(cinfo: &mut ffi::jpeg_common_struct) {
    let text = message(cinfo);
    // resume_unwind: no panic hook, no message on stderr.
    panic::resume_unwind(Box::new(Fatal(text)));
}

/// libjpeg's message hook: notes a premature end of data, ignores the rest.
extern "C-unwind" fn emit_message(cinfo: &mut ffi::jpeg_common_struct, level: c_int) {
    if level >= 0 {
        return; // trace messages
    }
    // SAFETY: `err` is the `manager` field of our Errors (repr(C), first field).
    // The message table is libjpeg's static array of C strings, indexed by
    // msg_code up to last_jpeg_message.
    unsafe {
        let errors = &mut *(cinfo.err as *mut Errors);
        let code = errors.manager.msg_code;
        let table = errors.manager.jpeg_message_table;
        if table.is_null() || code < 0 || code > errors.manager.last_jpeg_message {
            return;
        }
        let template = *table.add(code as usize);
        if !template.is_null()
            && CStr::from_ptr(template)
                .to_bytes()
                .starts_with(b"Premature end of JPEG file")
        {
            errors.truncated = true;
        }
    }
}

/// Whether `data` starts like a JPEG (SOI and a marker).
pub(crate) fn is_jpeg(data: &[u8]) -> bool {
    data.len() >= 3 && data[0] == 0xFF && data[1] == 0xD8 && data[2] == 0xFF
}

/// Decodes the part of `data` that the box `choose(width, height)` returns
/// needs, for an output of `out` (height, width) pixels; returns it with the box.
pub(crate) fn decode(
    data: &[u8],
    out: (u32, u32),
    dct_scaling: bool,
    choose: &mut dyn FnMut(u32, u32) -> CropBox,
) -> Result<(Region, CropBox), ImageError> {
    match panic::catch_unwind(AssertUnwindSafe(|| {
        decode_unguarded(data, out, dct_scaling, choose)
    })) {
        Ok(result) => result,
        Err(payload) => match payload.downcast::<Fatal>() {
            Ok(fatal) => Err(ImageError::Jpeg(fatal.0)),
            // Not libjpeg's: a bug, which keeps unwinding.
            Err(other) => panic::resume_unwind(other),
        },
    }
}

fn decode_unguarded(
    data: &[u8],
    out: (u32, u32),
    dct_scaling: bool,
    choose: &mut dyn FnMut(u32, u32) -> CropBox,
) -> Result<(Region, CropBox), ImageError> {
    // SAFETY (all of this function's blocks): the decompressor is boxed and
    // outlives every call; libjpeg reads `data` (alive for the whole call)
    // through jpeg_mem_src only within its length; each call is made in the
    // state the libjpeg API requires (create, source, header, start, crop, skip,
    // read) and any error unwinds to `decode` before the next.
    let mut d = Box::new(Decompressor {
        cinfo: unsafe { mem::zeroed() },
        errors: Errors {
            manager: unsafe { mem::zeroed() },
            truncated: false,
        },
        created: false,
    });
    unsafe {
        ffi::jpeg_std_error(&mut d.errors.manager);
    }
    d.errors.manager.error_exit = Some(error_exit);
    d.errors.manager.emit_message = Some(emit_message);
    d.cinfo.common.err = &mut d.errors.manager;
    unsafe {
        ffi::jpeg_CreateDecompress(
            &mut d.cinfo,
            ffi::JPEG_LIB_VERSION,
            mem::size_of::<ffi::jpeg_decompress_struct>(),
        );
    }
    d.created = true;
    unsafe {
        (*d.cinfo.common.mem).max_memory_to_use = MAX_MEMORY;
        ffi::jpeg_mem_src(&mut d.cinfo, data.as_ptr(), data.len() as c_ulong);
        ffi::jpeg_read_header(&mut d.cinfo, 1);
    }
    let (width, height) = (d.cinfo.image_width, d.cinfo.image_height);
    if width == 0 || height == 0 || u64::from(width) * u64::from(height) > MAX_PIXELS {
        return Err(ImageError::Size {
            width: width.into(),
            height: height.into(),
        });
    }
    d.cinfo.out_color_space = match d.cinfo.jpeg_color_space {
        ffi::J_COLOR_SPACE::JCS_GRAYSCALE
        | ffi::J_COLOR_SPACE::JCS_YCbCr
        | ffi::J_COLOR_SPACE::JCS_RGB => ffi::J_COLOR_SPACE::JCS_RGB,
        ffi::J_COLOR_SPACE::JCS_CMYK => return Err(ImageError::UnsupportedColorSpace("CMYK")),
        ffi::J_COLOR_SPACE::JCS_YCCK => return Err(ImageError::UnsupportedColorSpace("YCCK")),
        _ => return Err(ImageError::UnsupportedColorSpace("unknown colour space")),
    };
    let kept = choose(width, height);
    // The largest power-of-two reduction that keeps the box at least the
    // output's size (what Pillow's `draft` picks), libjpeg's defaults otherwise
    // (accurate integer IDCT, fancy upsampling), as Pillow decodes.
    let mut denom = 1u32;
    if dct_scaling {
        while denom < 8
            && kept.width / f64::from(denom * 2) >= f64::from(out.1)
            && kept.height / f64::from(denom * 2) >= f64::from(out.0)
        {
            denom *= 2;
        }
    }
    d.cinfo.scale_num = 1;
    d.cinfo.scale_denom = denom;
    unsafe {
        ffi::jpeg_start_decompress(&mut d.cinfo);
    }
    let (scaled_w, scaled_h) = (d.cinfo.output_width, d.cinfo.output_height);
    if d.cinfo.output_components != 3 {
        return Err(ImageError::Jpeg(format!(
            "{} output components, expected 3",
            d.cinfo.output_components
        )));
    }
    // The scaled pixels the box touches.
    let scale = f64::from(denom);
    let span = |start: f64, len: f64, limit: u32| {
        let first = ((start / scale).floor().max(0.0) as u32).min(limit - 1);
        let end = (((start + len) / scale).ceil() as u32).clamp(first + 1, limit);
        (first, end)
    };
    let (col0, col1) = span(kept.x, kept.width, scaled_w);
    let (row0, row1) = span(kept.y, kept.height, scaled_h);
    let mut left = col0;
    let mut columns = col1 - col0;
    if columns < scaled_w {
        // Moves `left` down to an iMCU boundary and widens `columns` to match.
        unsafe { ffi::jpeg_crop_scanline(&mut d.cinfo, &mut left, &mut columns) };
    }
    let width_out = d.cinfo.output_width as usize; // the cropped width
    if row0 > 0 {
        let skipped = unsafe { ffi::jpeg_skip_scanlines(&mut d.cinfo, row0) };
        if skipped != row0 {
            return Err(ImageError::Jpeg(format!(
                "could skip only {skipped} of {row0} rows"
            )));
        }
    }
    let rows = (row1 - row0) as usize;
    let stride = width_out * 3;
    let mut pixels = vec![0u8; rows * stride];
    let mut pointers: Vec<ffi::JSAMPROW_MUT> = pixels
        .chunks_exact_mut(stride)
        .map(|row| row.as_mut_ptr())
        .collect();
    let mut read = 0usize;
    while read < rows {
        let got = unsafe {
            ffi::jpeg_read_scanlines(
                &mut d.cinfo,
                pointers[read..].as_mut_ptr(),
                (rows - read) as u32,
            )
        };
        if got == 0 {
            return Err(ImageError::Jpeg(format!(
                "no progress after {read} of {rows} rows"
            )));
        }
        read += got as usize;
    }
    if d.errors.truncated {
        return Err(ImageError::Jpeg(
            "premature end of JPEG file (the image is truncated)".into(),
        ));
    }
    // The rows below the box are never decoded.
    unsafe { ffi::jpeg_abort_decompress(&mut d.cinfo) };
    Ok((
        Region {
            pixels,
            width: width_out,
            height: rows,
            left: left as usize,
            top: row0 as usize,
            denom,
        },
        kept,
    ))
}
