//! The portable backend: RustCrypto `chacha20`'s own core (SIMD on x86/ARM hosts, its soft
//! backend on RISC-V), driven block-range by block-range by [`ChaCha20Core`](super::ChaCha20Core).
use super::{Backend, ChaChaBlock, sealed};
use cipher::inout::InOutBuf;
use cipher::{KeyIvInit, StreamCipherCore};
use zeroize::Zeroize;

/// RustCrypto `chacha20` (`ChaChaCore<R20, Ietf>`) as a [`Backend`].
///
/// RustCrypto's core is not `Clone`; this backend keeps the key and nonce (zeroised on drop) and
/// clones by rebuilding the core from them.
pub struct Portable {
    core: chacha20::ChaChaCore<chacha20::R20, chacha20::variants::Ietf>,
    key: [u8; 32],
    nonce: [u8; 12],
}

impl sealed::Sealed for Portable {}

impl Backend for Portable {
    fn new(key: &[u8; 32], nonce: &[u8; 12]) -> Self {
        Portable {
            core: chacha20::ChaChaCore::new(key.into(), nonce.into()),
            key: *key,
            nonce: *nonce,
        }
    }

    fn apply_blocks(&mut self, counter: u32, blocks: InOutBuf<'_, '_, ChaChaBlock>) {
        // Its own position wraps to 0 after block 0xFFFF_FFFF; ours does not, and we set it
        // before every use.
        self.core.set_block_pos(counter);
        self.core.apply_keystream_blocks_inout(blocks);
    }
}

impl Clone for Portable {
    fn clone(&self) -> Self {
        Portable::new(&self.key, &self.nonce)
    }
}

impl Drop for Portable {
    fn drop(&mut self) {
        self.key.zeroize();
        self.nonce.zeroize();
    }
}
