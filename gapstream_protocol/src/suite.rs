//! Frame cipher suites (the `suite` byte of a frame header) and key-establishment modes.

use gap_rust_cipher_s::CipherId;

/// How a frame payload is protected. The wire value is `0x10 * authenticated + CipherId`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum Suite {
    /// Encryption off: payload in clear, no tag. Only for A/B latency measurements.
    None = 0x00,
    /// The ChaCha20 keystream alone, as in F. Barchi et al., "RUST-Encoded Stream Ciphers on a
    /// RISC-V Parallel Ultra-Low-Power Processor", PARMA-DITAM 2023: confidentiality only, detects
    /// NO tampering.
    ChaCha20Unauthenticated = 0x01,
    /// AES-128-CTR alone: confidentiality only, detects NO tampering.
    Aes128CtrUnauthenticated = 0x02,
    /// ChaCha20-Poly1305 (RFC 8439): the default.
    ChaCha20Poly1305 = 0x11,
    /// AES-128-GCM (NIST SP 800-38D), 96-bit nonce, 128-bit tag.
    Aes128Gcm = 0x12,
}

impl Suite {
    /// Every suite, AEADs first.
    pub const ALL: [Suite; 5] = [
        Suite::ChaCha20Poly1305,
        Suite::Aes128Gcm,
        Suite::ChaCha20Unauthenticated,
        Suite::Aes128CtrUnauthenticated,
        Suite::None,
    ];
    /// The suites that authenticate frames (the default allowed set).
    pub const AUTHENTICATED: [Suite; 2] = [Suite::ChaCha20Poly1305, Suite::Aes128Gcm];

    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            0x00 => Some(Suite::None),
            0x01 => Some(Suite::ChaCha20Unauthenticated),
            0x02 => Some(Suite::Aes128CtrUnauthenticated),
            0x11 => Some(Suite::ChaCha20Poly1305),
            0x12 => Some(Suite::Aes128Gcm),
            _ => None,
        }
    }

    /// The keystream cipher under the payload, if any.
    pub const fn cipher(self) -> Option<CipherId> {
        match self {
            Suite::None => None,
            Suite::ChaCha20Unauthenticated | Suite::ChaCha20Poly1305 => Some(CipherId::ChaCha20),
            Suite::Aes128CtrUnauthenticated | Suite::Aes128Gcm => Some(CipherId::Aes128Ctr),
        }
    }

    /// True when frames carry a tag over header and payload.
    pub const fn is_authenticated(self) -> bool {
        matches!(self, Suite::ChaCha20Poly1305 | Suite::Aes128Gcm)
    }

    /// Tag bytes after the payload.
    pub const fn tag_len(self) -> usize {
        if self.is_authenticated() { 16 } else { 0 }
    }

    /// Key bytes (0 for `None`).
    pub const fn key_len(self) -> usize {
        match self.cipher() {
            Some(c) => c.key_len(),
            None => 0,
        }
    }

    /// Largest payload the suite can protect under one nonce: 2^32 - 2 blocks for GCM (the 32-bit
    /// counter after J0 must not wrap), 2^32 - 1 blocks of 64 bytes for ChaCha20 (block 0 is the
    /// Poly1305 key); the 32-bit payload length of the frame header is the smaller bound here.
    pub const fn max_payload(self) -> u64 {
        let wire = u32::MAX as u64;
        let cipher = match self {
            Suite::Aes128Gcm => ((1u64 << 32) - 2) * 16,
            Suite::ChaCha20Poly1305 => ((1u64 << 32) - 1) * 64,
            _ => u64::MAX,
        };
        if cipher < wire { cipher } else { wire }
    }

    /// Stable lower-case name (CLI, key log, metrics).
    pub const fn name(self) -> &'static str {
        match self {
            Suite::None => "none",
            Suite::ChaCha20Unauthenticated => "chacha20-unauthenticated",
            Suite::Aes128CtrUnauthenticated => "aes128ctr-unauthenticated",
            Suite::ChaCha20Poly1305 => "chacha20poly1305",
            Suite::Aes128Gcm => "aes128gcm",
        }
    }

    /// Parses [`Suite::name`] (also accepts `chacha20` and `aes128ctr` for the unauthenticated ones).
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "none" => Suite::None,
            "chacha20-unauthenticated" | "chacha20" => Suite::ChaCha20Unauthenticated,
            "aes128ctr-unauthenticated" | "aes128ctr" | "aes-128-ctr" => {
                Suite::Aes128CtrUnauthenticated
            }
            "chacha20poly1305" | "chacha20-poly1305" => Suite::ChaCha20Poly1305,
            "aes128gcm" | "aes-128-gcm" => Suite::Aes128Gcm,
            _ => return None,
        })
    }
}

impl core::fmt::Display for Suite {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// How the session secret is established inside the authenticated Noise_KK handshake.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum KexMode {
    /// Noise_KK_25519 alone (ephemeral X25519; the default).
    X25519 = 1,
    /// Plus an ephemeral-ephemeral ECDH on P-256 (the Pi studies' ECDH mode).
    P256 = 2,
    /// Plus RSA-OAEP-2048 (SHA-256) key transport of a 32-byte secret from the drone to the
    /// receiver's RSA key (the Pi studies' RSA mode).
    RsaOaep2048 = 3,
}

impl KexMode {
    pub const ALL: [KexMode; 3] = [KexMode::X25519, KexMode::P256, KexMode::RsaOaep2048];

    pub const fn from_u8(v: u8) -> Option<Self> {
        match v {
            1 => Some(KexMode::X25519),
            2 => Some(KexMode::P256),
            3 => Some(KexMode::RsaOaep2048),
            _ => None,
        }
    }

    pub const fn name(self) -> &'static str {
        match self {
            KexMode::X25519 => "x25519",
            KexMode::P256 => "p256",
            KexMode::RsaOaep2048 => "rsa2048",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "x25519" => KexMode::X25519,
            "p256" | "ecdh-p256" => KexMode::P256,
            "rsa2048" | "rsa" | "rsa-oaep" => KexMode::RsaOaep2048,
            _ => return None,
        })
    }
}

impl core::fmt::Display for KexMode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_values_and_names_round_trip() {
        for s in Suite::ALL {
            assert_eq!(Suite::from_u8(s as u8), Some(s));
            assert_eq!(Suite::from_name(s.name()), Some(s));
            // Cipher id is the low nibble, the high nibble says "authenticated".
            assert_eq!(s.cipher().map(|c| c as u8).unwrap_or(0), s as u8 & 0x0F);
            assert_eq!(s.is_authenticated(), s as u8 & 0x10 != 0);
        }
        for m in KexMode::ALL {
            assert_eq!(KexMode::from_u8(m as u8), Some(m));
            assert_eq!(KexMode::from_name(m.name()), Some(m));
        }
        assert_eq!(Suite::from_u8(0x13), None);
        assert_eq!(Suite::Aes128Gcm.max_payload(), u32::MAX as u64);
    }
}
