//! The drone's long-term keys. They come from the pairing step (`gapstream pair` writes
//! `keys/drone.key`), never from source code: `firmware/Makefile` turns the pairing file into a
//! generated, git-ignored assembly file (`firmware/generated/keys.S`, `.incbin` of the file) at
//! build time, together with a per-build random device seed for the entropy pool. The firmware
//! parses the embedded text at start-up with the protocol crate's parser.

use gapstream_protocol::handshake::{DroneIdentity, PairingError};

/// Why the embedded keys are unusable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// No pairing file was embedded (empty).
    Missing,
    /// Not UTF-8 text.
    NotText,
    /// The pairing file does not parse.
    Pairing(PairingError),
    /// The receiver's key file was embedded instead of the drone's.
    WrongRole,
}

impl core::fmt::Display for KeyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            KeyError::Missing => {
                f.write_str("no pairing keys were built in (make KEYS=path/to/drone.key)")
            }
            KeyError::NotText => f.write_str("the built-in pairing file is not text"),
            KeyError::Pairing(e) => write!(f, "the built-in pairing file: {e}"),
            KeyError::WrongRole => f.write_str(
                "the built-in pairing file is the receiver's; the drone needs drone.key",
            ),
        }
    }
}

/// Parses the embedded pairing file (the drone's: its key and every paired receiver's public key).
pub fn drone_identity(text: &[u8]) -> Result<DroneIdentity, KeyError> {
    if text.is_empty() {
        return Err(KeyError::Missing);
    }
    let text = core::str::from_utf8(text).map_err(|_| KeyError::NotText)?;
    match DroneIdentity::from_pairing_text(text) {
        Ok(id) => Ok(id),
        Err(PairingError::BadRole) => Err(KeyError::WrongRole),
        Err(e) => Err(KeyError::Pairing(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gapstream_protocol::handshake::{self, Role};

    struct Rng(u8);
    impl gapstream_protocol::rand_core::TryRng for Rng {
        type Error = core::convert::Infallible;
        fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
            self.0 = self.0.wrapping_add(1);
            Ok(self.0 as u32 * 0x0101_0101)
        }
        fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
            Ok(self.try_next_u32()? as u64)
        }
        fn try_fill_bytes(&mut self, d: &mut [u8]) -> Result<(), Self::Error> {
            for b in d {
                self.0 = self.0.wrapping_add(7);
                *b = self.0;
            }
            Ok(())
        }
    }
    impl gapstream_protocol::rand_core::TryCryptoRng for Rng {}

    #[test]
    fn the_drone_file_parses_and_the_receiver_file_is_refused() {
        let (d, r) = handshake::pair_group(&mut Rng(1), 2);
        let dt = d.to_pairing_text();
        let id = drone_identity(dt.as_bytes()).unwrap();
        assert_eq!(id.local.to_bytes(), d.local.to_bytes());
        assert_eq!(id.receivers, d.receivers);
        let rt = r[0].to_pairing_text(Role::Receiver);
        assert_eq!(
            drone_identity(rt.as_bytes()).unwrap_err(),
            KeyError::WrongRole
        );
        assert_eq!(drone_identity(b"").unwrap_err(), KeyError::Missing);
        assert_eq!(
            drone_identity(&[0xFF, 0xFE]).unwrap_err(),
            KeyError::NotText
        );
        assert!(matches!(
            drone_identity(b"role=drone\nlocal_secret=12\n"),
            Err(KeyError::Pairing(_))
        ));
    }
}
