# Forward error correction over UDP (gapstream_fec; the bridge side in esp32_bridge::fec).
RV32_CRATES += gapstream_fec
