//! A core's worker as a data pointer and a plain function pointer, resolved once per call.
//!
//! Why not `&mut dyn Keystream`: a `dyn` call loads the method from the vtable, which lives in
//! `.rodata` — in L2 on GAP8, where the cluster has no data cache. Inside a round that load
//! competes with the round's DMA transfers and waits behind them (measured on the GAP8 GVSOC
//! model: ~830 cycles per round on core 0). [`Worker`] keeps the function pointer in the core's
//! own stack frame (L1) instead: it is `<W as Keystream>::apply_at` itself (its address is an
//! immediate in the code that builds the `Worker`), called with the erased `&mut W`.
//!
//! This module holds one of the wrapper's three pieces of `unsafe` (the others are `rotation.rs`
//! and `source.rs`; see the crate docs): a type-erased `&mut W` that is only ever given back to
//! `W`'s own method.
#![allow(unsafe_code)]

use crate::Error;
use crate::cipher::Keystream;
use core::marker::PhantomData;
use core::ptr::NonNull;

/// The resolved methods: `<W as Keystream>::apply_at` and `apply_in` with their receiver erased.
type CallAt = unsafe fn(NonNull<()>, u64, &mut [u8]) -> Result<(), Error>;
type CallIn = unsafe fn(NonNull<()>, u64, &mut [u8], usize) -> Result<(), Error>;

/// An exclusive borrow of some `W: Keystream` for `'w`, with `W::apply_at` and `W::apply_in`
/// resolved.
pub(crate) struct Worker<'w> {
    obj: NonNull<()>,
    call_at: CallAt,
    call_in: CallIn,
    _borrow: PhantomData<&'w mut ()>,
}

impl<'w> Worker<'w> {
    /// Borrows `w` exclusively for `'w`.
    pub(crate) fn new<W: Keystream>(w: &'w mut W) -> Self {
        let at: fn(&mut W, u64, &mut [u8]) -> Result<(), Error> = W::apply_at;
        let inn: fn(&mut W, u64, &mut [u8], usize) -> Result<(), Error> = W::apply_in;
        // SAFETY: only the type of the first parameter changes, from `&mut W` to `NonNull<()>`:
        // both are thin pointers (`W: Sized`), which the language documents as ABI-compatible
        // (`fn` pointer docs, "ABI compatibility"), and `unsafe fn` has the same ABI as `fn`. The
        // pointers are only ever called with `obj`, a `&mut W` (see `apply_at`, `apply_in`).
        let (call_at, call_in) = unsafe {
            (
                core::mem::transmute::<fn(&mut W, u64, &mut [u8]) -> Result<(), Error>, CallAt>(at),
                core::mem::transmute::<
                    fn(&mut W, u64, &mut [u8], usize) -> Result<(), Error>,
                    CallIn,
                >(inn),
            )
        };
        Worker {
            obj: NonNull::from(w).cast(),
            call_at,
            call_in,
            _borrow: PhantomData,
        }
    }

    /// `w.apply_at(pos, data)`.
    #[inline(always)]
    pub(crate) fn apply_at(&mut self, pos: u64, data: &mut [u8]) -> Result<(), Error> {
        // SAFETY: `obj` was made from a `&'w mut W` in `new`, paired with `W::apply_at`; the
        // borrow lasts as long as `self` (`PhantomData<&'w mut ()>`), and `&mut self` makes this
        // call the only access to it, so passing it where `W::apply_at` takes `&mut W` is valid.
        unsafe { (self.call_at)(self.obj, pos, data) }
    }

    /// `w.apply_in(pos, buf, len)`.
    #[inline(always)]
    pub(crate) fn apply_in(&mut self, pos: u64, buf: &mut [u8], len: usize) -> Result<(), Error> {
        // SAFETY: as in `apply_at`, with `W::apply_in`.
        unsafe { (self.call_in)(self.obj, pos, buf, len) }
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
            // The default `apply_in` works on `buf[..len]` only, and refuses `len > buf.len()`.
            let mut e = [0u8; 4];
            w.apply_in(2, &mut e, 2).unwrap();
            assert_eq!(e, [7, 7, 0, 0]);
            assert_eq!(w.apply_in(0, &mut e, 5), Err(Error::Length));
        }
        assert_eq!(c.0, 15 + 4);
    }
}
