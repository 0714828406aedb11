//! Compress, then seal, checked on the receiver's side of `make gvsoc-e2e E2E_CODEC=jpeg|jpegls`:
//! every verified frame must be the file the host's portable encoder writes for one of the input
//! frames (the cluster encoders on the GAP8 and the portable ones are bit-exact):
//!
//! * JPEG (`gapstream_jpeg::encode`): it must decode with an independent decoder (the
//!   `jpeg-decoder` crate) to a 324×244 grey picture; the PSNR against its input is reported.
//! * JPEG-LS (`gapstream_jpegls::encode`): it must decode bit-exact to its input with the
//!   project's decoder (`gapstream_jpegls::decode`) and, when the project venv is there, with
//!   CharLS (`charls_check.py`, imagecodecs' CharLS).
use gapstream_jpeg::{FrameSpec, Portable};
use gapstream_jpegls::{BandChooser, Layout};

/// The JPEG files the firmware must send for `inputs` (`width × height` grey frames) at
/// `quality` with `bands` restart intervals (one per cluster core).
pub fn expected_jpeg(
    inputs: &[Vec<u8>],
    width: u16,
    height: u16,
    quality: u8,
    bands: u8,
) -> Result<Vec<Vec<u8>>, String> {
    let spec = FrameSpec {
        width,
        height,
        quality,
        bands,
    };
    let layout = spec.layout().map_err(|e| e.to_string())?;
    inputs
        .iter()
        .map(|px| {
            let mut out = vec![0u8; layout.max_len()];
            let n = gapstream_jpeg::encode::<Portable>(&spec, px, &mut out)
                .map_err(|e| e.to_string())?;
            out.truncate(n);
            Ok(out)
        })
        .collect()
}

/// The JPEG-LS stream the firmware must send for each of `inputs` (`width × height` grey
/// frames) with a coder of `bands` bands (one per cluster core), and its band count: the
/// firmware's `JplsCoder` takes each frame's plan from the frame itself
/// (`gapstream_jpegls::BandChooser::plan`: `bands` bands with their preset, or
/// `BandChooser::SPARSE_BANDS` bands with the sparse preset for a frame of few bits a sample),
/// the same function as here, so input `i`'s stream is entry `i` and nothing else.
pub fn expected_jpegls(
    inputs: &[Vec<u8>],
    width: u16,
    height: u16,
    bands: u8,
) -> Result<(Vec<Vec<u8>>, Vec<usize>), String> {
    let chooser = BandChooser::new(bands.into());
    let (w, h) = (width.into(), height.into());
    let mut streams = Vec::new();
    let mut counts = Vec::new();
    for px in inputs {
        let plan = chooser
            .plan(w, h, Layout::Grey, px)
            .map_err(|e| e.to_string())?;
        let mut out = vec![0u8; plan.max_encoded_len()];
        let n = gapstream_jpegls::encode(&plan, px, &mut out).map_err(|e| e.to_string())?;
        out.truncate(n);
        streams.push(out);
        counts.push(plan.bands());
    }
    Ok((streams, counts))
}

/// Decodes a JPEG-LS stream with the project's decoder: its samples, if it is a one-component
/// `width × height` picture.
pub fn decode_jpegls(bytes: &[u8], width: u16, height: u16) -> Result<Vec<u8>, String> {
    let img = gapstream_jpegls::decode(bytes).map_err(|e| format!("gapstream_jpegls: {e}"))?;
    if (img.width, img.height, img.components) != (width.into(), height.into(), 1) {
        return Err(format!(
            "gapstream_jpegls: a {}x{} picture of {} components, not {width}x{height} grey",
            img.width, img.height, img.components
        ));
    }
    Ok(img.samples)
}

/// Decodes a JPEG file with `jpeg-decoder`: its grey pixels, if it is an 8-bit greyscale
/// `width × height` picture. The frame header is read and checked first: `jpeg-decoder` applies
/// its size limit only after decoding, so a small file claiming a huge picture would cost its
/// whole decoding before the refusal.
pub fn decode_jpeg(bytes: &[u8], width: u16, height: u16) -> Result<Vec<u8>, String> {
    let mut d = jpeg_decoder::Decoder::new(bytes);
    d.read_info().map_err(|e| format!("jpeg-decoder: {e}"))?;
    let info = d.info().ok_or("jpeg-decoder: no frame header")?;
    if info.pixel_format != jpeg_decoder::PixelFormat::L8
        || (info.width, info.height) != (width, height)
    {
        return Err(format!(
            "jpeg-decoder: a {}x{} {:?} picture, not {width}x{height} grey",
            info.width, info.height, info.pixel_format
        ));
    }
    let px = d.decode().map_err(|e| format!("jpeg-decoder: {e}"))?;
    if px.len() != width as usize * height as usize {
        return Err(format!(
            "jpeg-decoder: {} samples, not {width}x{height}",
            px.len()
        ));
    }
    Ok(px)
}

/// Peak signal-to-noise ratio of `b` against `a` in dB (infinite when equal).
pub fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let se: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| (x as f64 - y as f64).powi(2))
        .sum();
    if se == 0.0 {
        return f64::INFINITY;
    }
    10.0 * (255.0f64 * 255.0 * a.len() as f64 / se).log10()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expected files decode (jpeg-decoder) close to their input; garbage and a wrong size
    /// are refused, not panicked on.
    #[test]
    fn expected_files_decode_and_bad_ones_are_refused() {
        let (w, h) = (324u16, 244u16);
        let px: Vec<u8> = (0..w as usize * h as usize)
            .map(|i| ((i % 324) / 3 + (i / 324) / 2) as u8)
            .collect();
        let files = expected_jpeg(std::slice::from_ref(&px), w, h, 75, 8).unwrap();
        let dec = decode_jpeg(&files[0], w, h).unwrap();
        assert!(psnr(&px, &dec) > 35.0, "{}", psnr(&px, &dec));
        assert!(decode_jpeg(&files[0], w, h + 1).is_err());
        assert!(decode_jpeg(b"not a jpeg", w, h).is_err());
        // A file whose frame header claims 20000 x 20000 is refused from the header (decoding it
        // first would take tens of seconds and ~400 MB).
        let mut huge = files[0].clone();
        let sof = huge.windows(2).position(|m| m == [0xFF, 0xC0]).unwrap();
        huge[sof + 5..sof + 9].copy_from_slice(&[0x4E, 0x20, 0x4E, 0x20]);
        let e = decode_jpeg(&huge, w, h).unwrap_err();
        assert!(e.contains("20000x20000"), "{e}");
        // JPEG-LS: bit-exact back; garbage and a wrong size refused.
        // One stream per input, with the plan the chooser takes from it: the ramp 8 bands, a
        // frame of flat stripes 5 with the sparse preset.
        let flat: Vec<u8> = (0..w as usize * h as usize)
            .map(|i| if (i % 324) / 54 % 2 == 0 { 40 } else { 200 })
            .collect();
        let inputs = [px.clone(), flat.clone()];
        let (files, bands) = expected_jpegls(&inputs, w, h, 8).unwrap();
        assert_eq!(bands, [8, 5]);
        for (f, input) in files.iter().zip(&inputs) {
            assert_eq!(decode_jpegls(f, w, h).unwrap(), *input);
            let plan = BandChooser::new(8)
                .plan(324, 244, Layout::Grey, input)
                .unwrap();
            assert_eq!(*f, gapstream_jpegls::encode_to_vec(&plan, input).unwrap());
        }
        assert!(decode_jpegls(&files[0], w + 1, h).is_err());
        assert!(decode_jpegls(b"not a jls", w, h).is_err());
        assert_eq!(psnr(&px, &px), f64::INFINITY);
    }
}
