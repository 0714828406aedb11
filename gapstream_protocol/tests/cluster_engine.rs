//! The frame code is generic over `KeystreamApplier`: frames sealed through the 8-core cluster
//! engine (`gap_rust_cipher_s::engine::ClusterEngine` on `gap_rust_sdk`'s host backend, the code
//! the GAP8 runs on its cluster) open with the single-core `Sequential`, and the other way round,
//! for every suite, at the camera's frame size.

use gap_rust_cipher_s::engine::{ClusterEngine, Config};
use gap_rust_sdk::host::HostCluster;
use gapstream_protocol::aead::PayloadKey;
use gapstream_protocol::frame::{open_frame, seal_frame};
use gapstream_protocol::keys::{DirectionKey, IvBytes};
use gapstream_protocol::wire::{FrameHeader, PixelFormat};
use gapstream_protocol::{KeystreamApplier, Sequential, Suite};

fn key<K: KeystreamApplier>(k: &mut K, suite: Suite) -> DirectionKey {
    let bytes: Vec<u8> = (0..suite.key_len() as u8)
        .map(|i| i.wrapping_mul(37).wrapping_add(5))
        .collect();
    DirectionKey {
        key: PayloadKey::new(k, suite, &bytes).unwrap(),
        iv: IvBytes([0x5A; 12]),
    }
}

fn round_trip<A: KeystreamApplier, B: KeystreamApplier>(a: &mut A, b: &mut B, suite: Suite) {
    let pixels: Vec<u8> = (0..324 * 244u32).map(|i| (i * 7 + 3) as u8).collect();
    let h = FrameHeader {
        suite: suite as u8,
        pixel_format: PixelFormat::Grey8.code(),
        width: 324,
        height: 244,
        epoch: 3,
        sequence: 77,
        capture_ns: 123,
        payload_len: pixels.len() as u32,
        state: None,
    };
    let mut payload = pixels.clone();
    let ka = key(a, suite);
    let sealed = seal_frame(a, &ka, &h, &mut payload).unwrap();
    let mut msg = sealed.header.to_vec();
    msg.extend_from_slice(&payload);
    msg.extend_from_slice(sealed.tag());
    // Same bytes as the other engine would produce.
    let mut p2 = pixels.clone();
    let kb = key(b, suite);
    let s2 = seal_frame(b, &kb, &h, &mut p2).unwrap();
    assert_eq!(p2, payload, "{suite}: ciphertext differs between engines");
    assert_eq!(
        s2.tag(),
        sealed.tag(),
        "{suite}: tag differs between engines"
    );
    open_frame(b, &kb, &mut msg).unwrap();
    assert_eq!(&msg[36..36 + pixels.len()], &pixels[..], "{suite}");
}

#[test]
fn cluster_engine_and_sequential_interoperate() {
    let cluster = HostCluster::new();
    let mut eng = ClusterEngine::new(&cluster, Config::new(8, 8192)).unwrap();
    for suite in Suite::ALL {
        round_trip(&mut eng, &mut Sequential, suite);
        round_trip(&mut Sequential, &mut eng, suite);
    }
}

/// AES-128-GCM sealed on the cluster engine (GHASH fused into the AES-CTR pass, any core count,
/// both transfers) is what RustCrypto `aes-gcm` makes, for the frame size and odd lengths, with a
/// 36-byte header as AAD.
#[test]
fn cluster_aes_gcm_seal_equals_aes_gcm() {
    use aes_gcm::aead::{AeadInOut, KeyInit};
    use gap_rust_cipher_s::engine::Transfer;
    let key: [u8; 16] = core::array::from_fn(|i| (i * 11 + 1) as u8);
    let nonce: [u8; 12] = core::array::from_fn(|i| (i * 3 + 200) as u8);
    let aad: [u8; 36] = core::array::from_fn(|i| i as u8);
    let cluster = HostCluster::new();
    for cores in [1usize, 2, 3, 5, 8] {
        for transfer in [Transfer::Auto, Transfer::Dma, Transfer::Direct] {
            let mut eng = ClusterEngine::new(&cluster, Config::new(cores, 8192)).unwrap();
            eng.set_transfer(transfer);
            let k = PayloadKey::new(&mut eng, Suite::Aes128Gcm, &key).unwrap();
            for len in [0usize, 1, 15, 17, 4095, 79_056] {
                let pt: Vec<u8> = (0..len).map(|i| (i * 29 + 7) as u8).collect();
                let mut ours = pt.clone();
                let tag = k.seal(&mut eng, &nonce, &aad, &mut ours).unwrap();
                let mut theirs = pt.clone();
                let r = aes_gcm::Aes128Gcm::new(&key.into());
                let rtag = r
                    .encrypt_inout_detached(&nonce.into(), &aad, theirs.as_mut_slice().into())
                    .unwrap();
                assert!(
                    ours == theirs,
                    "{cores} cores {transfer:?} {len} B: ciphertext"
                );
                assert_eq!(
                    &tag[..],
                    &rtag[..],
                    "{cores} cores {transfer:?} {len} B: tag"
                );
            }
        }
    }
}
