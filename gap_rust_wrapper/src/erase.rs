//! A core's worker as a data pointer and a plain function pointer, resolved once per call.
//!
//! Why not `&mut dyn Keystream`: a `dyn` call loads the method from the vtable, which lives in
//! `.rodata` — in L2 on GAP8, where the cluster has no data cache. Inside a round that load
//! competes with the round's DMA transfers and waits behind them (measured on the GAP8 GVSOC
//! model: ~830 cycles per round on core 0). [`Worker`] keeps the function pointer in the core's
//! own stack frame (L1) instead; the function is a per-type trampoline whose address is an
//! immediate.
//!
//! This module holds the wrapper's second and last piece of `unsafe` (the other is
//! `rotation.rs`): a type-erased `&mut W` that is only ever given back to `W`'s own trampoline.
#![allow(unsafe_code)]

use crate::Error;
use crate::cipher::Keystream;
use core::marker::PhantomData;
use core::ptr::NonNull;

/// The resolved method: `trampoline::<W>`.
type Call = unsafe fn(NonNull<()>, u64, &mut [u8]) -> Result<(), Error>;

/// An exclusive borrow of some `W: Keystream` for `'w`, with `W::apply_at` resolved.
pub(crate) struct Worker<'w> {
    obj: NonNull<()>,
    call: Call,
    _borrow: PhantomData<&'w mut ()>,
}

/// `W::apply_at` on the `W` behind `obj`.
///
/// # Safety
/// `obj` points to a live `W` that nobody else accesses during the call.
// Runs every round: linked with the engine's hot code on GAP8.
#[cfg_attr(target_arch = "riscv32", unsafe(link_section = ".text.hot.0.engine"))]
unsafe fn trampoline<W: Keystream>(
    obj: NonNull<()>,
    pos: u64,
    data: &mut [u8],
) -> Result<(), Error> {
    // SAFETY: caller contract.
    let w = unsafe { obj.cast::<W>().as_mut() };
    w.apply_at(pos, data)
}

impl<'w> Worker<'w> {
    /// Borrows `w` exclusively for `'w`.
    pub(crate) fn new<W: Keystream>(w: &'w mut W) -> Self {
        Worker {
            obj: NonNull::from(w).cast(),
            call: trampoline::<W>,
            _borrow: PhantomData,
        }
    }

    /// `w.apply_at(pos, data)`.
    #[inline(always)]
    pub(crate) fn apply_at(&mut self, pos: u64, data: &mut [u8]) -> Result<(), Error> {
        // SAFETY: `obj` was made from a `&'w mut W` in `new`, paired with `trampoline::<W>`; the
        // borrow lasts as long as `self` (`PhantomData<&'w mut ()>`), and `&mut self` makes this
        // call the only access to it.
        unsafe { (self.call)(self.obj, pos, data) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count(u64);
    impl Keystream for Count {
        fn apply_at(&mut self, pos: u64, data: &mut [u8]) -> Result<(), Error> {
            self.0 += pos + data.len() as u64;
            data.fill(7);
            Ok(())
        }
    }

    #[test]
    fn calls_reach_the_borrowed_worker() {
        let mut c = Count(0);
        {
            let mut w = Worker::new(&mut c);
            let mut d = [0u8; 3];
            w.apply_at(10, &mut d).unwrap();
            w.apply_at(1, &mut d[..1]).unwrap();
            assert_eq!(d, [7, 7, 7]);
        }
        assert_eq!(c.0, 15);
    }
}
