//! The band count and preset chosen per frame from the previous frame's coded size
//! ([`BandChooser`]).
//!
//! Every restart costs a frame its first line coded against zeros and the context model learnt
//! again. On a picture that codes as the photographs do (1.7 bits a sample and more on the frame
//! set) 8 bands stay within 1.05× of one scan; on a picture that codes in few bits a sample (the
//! synthetic pattern: 1.2 bits a sample with 8 bands) the same restarts are a much larger share of
//! the stream, and fewer bands with a preset for them keep it within 1.05×. Such pictures are also
//! the fastest to code per sample (long runs), so fewer cores code them in about the time 8 cores
//! take for a photograph. A drone streams a scene, not independent pictures: the previous frame's
//! size tells which kind the next frame is. A scene change costs at most one frame at the old
//! band count.
use crate::encode::Plan;
use crate::model::Preset;
use crate::{EncodeError, Layout};

/// Chooses the next frame's [`Plan`] from the previous frame's coded size: `bands` bands with
/// [`Plan::new`]'s preset, or [`BandChooser::SPARSE_BANDS`] bands with
/// [`BandChooser::SPARSE_PRESET`] after a frame that coded in fewer than
/// [`BandChooser::SPARSE_BELOW_MILLIBITS`] thousandths of a bit a sample.
///
/// The first frame (no statistics yet) gets `bands`. The rule needs no hysteresis: a frame coded
/// with fewer bands codes in fewer bytes (fewer restarts), so a still scene that was chosen
/// sparse stays sparse.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandChooser {
    bands: usize,
    sparse: bool,
}

impl BandChooser {
    /// Bands of a sparse frame (when the chooser's `bands` is larger).
    pub const SPARSE_BANDS: usize = 5;
    /// The preset of a sparse frame: T1 = 4, T2 = 12, T3 = 128, RESET = 4. With 5 bands the
    /// best for the synthetic pattern of a sweep over 4,321 settings with small RESET
    /// (`PRESET_GRID=sparse PRESET_BANDS=5` in `examples/preset_sweep.rs`: 1.037× CharLS; RESET
    /// decides, T1 and T2 hardly matter to it), and of the settings that give it that, one that
    /// costs a photograph coded with it (a scene change) less: 1.07–1.11× against up to 1.20×
    /// with T1 = 1, T2 = 2.
    pub const SPARSE_PRESET: Preset = Preset {
        t1: 4,
        t2: 12,
        t3: 128,
        reset: 4,
    };
    /// A frame is sparse when its stream took fewer than this many thousandths of a bit a sample
    /// (1.5 bits): the frame set's synthetic pattern takes 1.22 with 8 bands, its photographs
    /// 1.76 (moon) to 6.57.
    pub const SPARSE_BELOW_MILLIBITS: u64 = 1500;

    /// A chooser for a coder of `bands` bands per component (its core count); the first frame
    /// gets `bands`.
    pub const fn new(bands: usize) -> BandChooser {
        BandChooser {
            bands,
            sparse: false,
        }
    }

    /// The coder's band count (what a frame that is not sparse gets).
    pub const fn max_bands(&self) -> usize {
        self.bands
    }

    /// True when the last frame observed was sparse.
    pub const fn sparse(&self) -> bool {
        self.sparse
    }

    /// The band count of the next frame.
    pub const fn bands(&self) -> usize {
        if self.sparse && self.bands > Self::SPARSE_BANDS {
            Self::SPARSE_BANDS
        } else {
            self.bands
        }
    }

    /// The next frame's plan: [`Plan::new`] with [`BandChooser::bands`], with
    /// [`BandChooser::SPARSE_PRESET`] when the band count was lowered.
    pub fn plan(&self, width: usize, height: usize, layout: Layout) -> Result<Plan, EncodeError> {
        let plan = Plan::new(width, height, layout, self.bands())?;
        Ok(if self.bands() < self.bands {
            plan.with_preset(Self::SPARSE_PRESET)
        } else {
            plan
        })
    }

    /// True when a `samples`-sample picture coded in `coded_len` bytes is sparse.
    pub const fn is_sparse(samples: usize, coded_len: usize) -> bool {
        (coded_len as u64).saturating_mul(8000) < Self::SPARSE_BELOW_MILLIBITS * samples as u64
    }

    /// Takes a coded frame's statistics: `plan` is what it was coded with, `coded_len` its
    /// stream's length in bytes (`None`: it was not coded, e.g. sent raw; the choice is kept).
    pub fn observe(&mut self, plan: &Plan, coded_len: Option<usize>) {
        if let Some(n) = coded_len {
            self.sparse = Self::is_sparse(plan.width() * plan.height(), n);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const W: usize = 324;
    const H: usize = 244;

    #[test]
    fn the_threshold_sits_between_the_synthetic_pattern_and_the_photographs() {
        let px = W * H;
        // The synthetic pattern with 8 bands (12,068 B) and with the sparse plan (< 11,000 B).
        assert!(BandChooser::is_sparse(px, 12_068));
        assert!(BandChooser::is_sparse(px, 10_900));
        // The smallest photograph with 8 bands (moon, 17,407 B) and with the sparse plan.
        assert!(!BandChooser::is_sparse(px, 17_407));
        assert!(!BandChooser::is_sparse(px, 16_800));
        // 1.5 bits a sample: 14,823 B for 79,056 samples.
        assert!(BandChooser::is_sparse(px, 14_822));
        assert!(!BandChooser::is_sparse(px, 14_823));
    }

    #[test]
    fn first_frame_dense_then_follows_the_previous_frame() {
        let mut c = BandChooser::new(8);
        let p = c.plan(W, H, Layout::Grey).unwrap();
        assert_eq!(p, Plan::new(W, H, Layout::Grey, 8).unwrap());
        c.observe(&p, Some(12_068));
        assert!(c.sparse());
        let q = c.plan(W, H, Layout::Grey).unwrap();
        assert_eq!(q.bands(), BandChooser::SPARSE_BANDS);
        assert_eq!(q.preset(), BandChooser::SPARSE_PRESET);
        // A frame sent raw keeps the choice.
        c.observe(&q, None);
        assert_eq!(c.plan(W, H, Layout::Grey).unwrap(), q);
        c.observe(&q, Some(40_000));
        assert_eq!(c.plan(W, H, Layout::Grey).unwrap(), p);
    }

    #[test]
    fn few_cores_never_get_more_bands() {
        for bands in 1..=BandChooser::SPARSE_BANDS {
            let mut c = BandChooser::new(bands);
            let p = c.plan(W, H, Layout::Grey).unwrap();
            c.observe(&p, Some(1));
            assert_eq!(
                c.plan(W, H, Layout::Grey).unwrap(),
                Plan::new(W, H, Layout::Grey, bands).unwrap()
            );
        }
    }

    proptest! {
        #[test]
        fn chosen_plan_follows_the_rule(
            bands in 1usize..=16,
            w in 1usize..=2000,
            h in 1usize..=2000,
            coded in 0usize..=20_000_000,
            bayer in any::<bool>(),
        ) {
            let layout = if bayer { Layout::BayerRggb } else { Layout::Grey };
            let (w, h) = if bayer { (w & !1 | 2, h & !1 | 2) } else { (w, h) };
            let mut c = BandChooser::new(bands);
            let first = c.plan(w, h, layout).unwrap();
            prop_assert_eq!(first, Plan::new(w, h, layout, bands).unwrap());
            c.observe(&first, Some(coded));
            let sparse = (coded as u128) * 8000 < 1500 * (w * h) as u128;
            prop_assert_eq!(c.sparse(), sparse);
            let next = c.plan(w, h, layout).unwrap();
            if sparse && bands > BandChooser::SPARSE_BANDS {
                prop_assert_eq!(
                    next,
                    Plan::new(w, h, layout, BandChooser::SPARSE_BANDS)
                        .unwrap()
                        .with_preset(BandChooser::SPARSE_PRESET)
                );
            } else {
                prop_assert_eq!(next, first);
            }
            prop_assert!(next.bands() <= first.bands().max(1));
            // The decision depends on the previous frame only.
            c.observe(&next, Some(usize::MAX / 8000));
            prop_assert_eq!(c.plan(w, h, layout).unwrap(), first);
        }
    }
}
