//! L1 / L2 allocation: the backend primitive [`RawAlloc`], the RAII buffer [`Buf`] that frees exactly
//! what it allocated, and [`Arena`], a bounded first-fit allocator whose bookkeeping lives outside the
//! memory it manages (so a 64 KiB L1 gives 64 KiB of buffers, and a wrong free is caught).
use core::alloc::Layout;
use core::ptr::NonNull;

/// Why an allocation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocError {
    /// Not enough contiguous free memory (or no bookkeeping slot left).
    OutOfMemory,
    /// The alignment is not a power of two or the size overflows.
    Layout,
}

impl core::fmt::Display for AllocError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            AllocError::OutOfMemory => "out of memory",
            AllocError::Layout => "invalid size or alignment",
        })
    }
}

/// A backend's allocator for one memory (L1 TCDM or L2).
///
/// # Safety
/// An implementation must return memory that is valid for reads and writes of `layout.size()`
/// bytes, aligned to `layout.align()`, not handed out again until [`RawAlloc::dealloc`] is called
/// for it, and that stays valid for as long as the allocator itself is alive.
pub unsafe trait RawAlloc {
    /// Allocates `layout` (`layout.size() > 0`); `None` when the memory is exhausted.
    fn alloc(&self, layout: Layout) -> Option<NonNull<u8>>;

    /// Frees an allocation.
    ///
    /// # Safety
    /// `ptr` was returned by `self.alloc(layout)` with this exact `layout` and is not freed yet.
    unsafe fn dealloc(&self, ptr: NonNull<u8>, layout: Layout);

    /// Allocates `len` zeroed bytes aligned to `align` as a [`Buf`] that frees itself.
    fn alloc_zeroed(&self, len: usize, align: usize) -> Result<Buf<'_, Self>, AllocError>
    where
        Self: Sized,
    {
        Buf::zeroed(self, len, align)
    }
}

/// `len` bytes allocated from `A`, aligned as asked, freed on drop with the same pointer and layout.
///
/// The memory is zeroed when allocated, so it is always initialised. The buffer borrows its
/// allocator, so it cannot outlive it (an L1 buffer cannot outlive its cluster).
pub struct Buf<'a, A: RawAlloc> {
    ptr: NonNull<u8>,
    layout: Layout,
    alloc: &'a A,
}

// SAFETY: a `Buf` owns its bytes exclusively; sending it to another thread only needs the allocator
// to be usable from there (for `dealloc`), which `A: Sync` guarantees.
unsafe impl<A: RawAlloc + Sync> Send for Buf<'_, A> {}
// SAFETY: `&Buf` only gives `&[u8]`.
unsafe impl<A: RawAlloc + Sync> Sync for Buf<'_, A> {}

impl<'a, A: RawAlloc> Buf<'a, A> {
    /// Allocates `len` zeroed bytes aligned to `align` (a power of two). `len == 0` allocates nothing.
    pub fn zeroed(alloc: &'a A, len: usize, align: usize) -> Result<Self, AllocError> {
        let layout = Layout::from_size_align(len, align).map_err(|_| AllocError::Layout)?;
        let ptr = if len == 0 {
            // A dangling, aligned pointer: valid for zero-length slices, never freed.
            NonNull::new(align as *mut u8).ok_or(AllocError::Layout)?
        } else {
            let p = alloc.alloc(layout).ok_or(AllocError::OutOfMemory)?;
            // SAFETY: `RawAlloc` guarantees `p` is valid for `len` bytes and exclusively ours.
            unsafe { core::ptr::write_bytes(p.as_ptr(), 0, len) };
            p
        };
        Ok(Buf { ptr, layout, alloc })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.layout.size()
    }

    /// True for a zero-length buffer.
    pub fn is_empty(&self) -> bool {
        self.layout.size() == 0
    }

    /// The layout it was allocated with (and will be freed with).
    pub fn layout(&self) -> Layout {
        self.layout
    }
}

impl<A: RawAlloc> core::ops::Deref for Buf<'_, A> {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: `ptr` is valid, initialised (zeroed at allocation) and owned by `self` for `len`
        // bytes (or dangling-but-aligned for `len == 0`).
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl<A: RawAlloc> core::ops::DerefMut for Buf<'_, A> {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` makes this the only reference.
        unsafe { core::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }
}

impl<A: RawAlloc> Drop for Buf<'_, A> {
    fn drop(&mut self) {
        if self.layout.size() != 0 {
            // SAFETY: `ptr` came from `self.alloc.alloc(self.layout)` and is freed only here.
            unsafe { self.alloc.dealloc(self.ptr, self.layout) };
        }
    }
}

impl<A: RawAlloc> core::fmt::Debug for Buf<'_, A> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Buf")
            .field("addr", &self.ptr)
            .field("len", &self.layout.size())
            .field("align", &self.layout.align())
            .finish()
    }
}

/// Live allocations an [`Arena`] can track.
pub const ARENA_SLOTS: usize = 32;

/// A first-fit allocator over the address range `[base, base + size)`.
///
/// The bookkeeping (a sorted table of up to [`ARENA_SLOTS`] live blocks) lives in the `Arena` value,
/// not in the managed memory, so the whole range is usable and the managed memory is never read or
/// written by the arena. [`Arena::free`] accepts only an exact `(address, size)` pair it handed out.
#[derive(Debug)]
pub struct Arena {
    base: usize,
    size: usize,
    blocks: [(usize, usize); ARENA_SLOTS],
    used: usize,
}

impl Arena {
    /// An arena over `[base, base + size)` (addresses only; nothing is accessed).
    pub const fn new(base: usize, size: usize) -> Self {
        Arena {
            base,
            size,
            blocks: [(0, 0); ARENA_SLOTS],
            used: 0,
        }
    }

    /// First address of the managed range.
    pub fn base(&self) -> usize {
        self.base
    }

    /// Size of the managed range.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Bytes currently allocated.
    pub fn allocated(&self) -> usize {
        self.blocks[..self.used].iter().map(|b| b.1).sum()
    }

    /// Number of live allocations.
    pub fn live(&self) -> usize {
        self.used
    }

    /// Allocates `size > 0` bytes aligned to `align` (a power of two); returns the address.
    pub fn alloc(&mut self, size: usize, align: usize) -> Result<usize, AllocError> {
        if size == 0 || !align.is_power_of_two() {
            return Err(AllocError::Layout);
        }
        if self.used == ARENA_SLOTS {
            return Err(AllocError::OutOfMemory);
        }
        let end_of_range = self.base.checked_add(self.size).ok_or(AllocError::Layout)?;
        let mut gap_start = self.base;
        for i in 0..=self.used {
            let gap_end = if i < self.used {
                self.blocks[i].0
            } else {
                end_of_range
            };
            if let Some(start) = align_up(gap_start, align) {
                if start.checked_add(size).is_some_and(|e| e <= gap_end) {
                    self.blocks.copy_within(i..self.used, i + 1);
                    self.blocks[i] = (start, size);
                    self.used += 1;
                    return Ok(start);
                }
            }
            if i < self.used {
                gap_start = self.blocks[i].0 + self.blocks[i].1;
            }
        }
        Err(AllocError::OutOfMemory)
    }

    /// Frees the block at `addr`; `size` must be the size it was allocated with.
    /// Returns `false` (and frees nothing) for any other pair.
    pub fn free(&mut self, addr: usize, size: usize) -> bool {
        match self.blocks[..self.used]
            .iter()
            .position(|&b| b == (addr, size))
        {
            Some(i) => {
                self.blocks.copy_within(i + 1..self.used, i);
                self.used -= 1;
                true
            }
            None => false,
        }
    }
}

fn align_up(addr: usize, align: usize) -> Option<usize> {
    Some(addr.checked_add(align - 1)? & !(align - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    extern crate std;
    use proptest::prelude::*;
    use std::vec::Vec;

    #[test]
    fn fills_exactly_and_fails_when_full() {
        let mut a = Arena::new(0x1000_0000, 64 * 1024);
        let x = a.alloc(32 * 1024, 8).unwrap();
        let y = a.alloc(32 * 1024, 8).unwrap();
        assert_eq!((x, y), (0x1000_0000, 0x1000_8000));
        assert_eq!(a.alloc(1, 1), Err(AllocError::OutOfMemory));
        assert!(!a.free(x, 16), "a free with the wrong size must be refused");
        assert!(a.free(x, 32 * 1024));
        assert_eq!(a.alloc(32 * 1024 + 1, 1), Err(AllocError::OutOfMemory));
        assert_eq!(a.alloc(100, 4096).unwrap(), 0x1000_0000);
    }

    #[test]
    fn rejects_bad_layouts() {
        let mut a = Arena::new(0, 1024);
        assert_eq!(a.alloc(0, 4), Err(AllocError::Layout));
        assert_eq!(a.alloc(4, 3), Err(AllocError::Layout));
    }

    proptest! {
        // Random alloc/free sequences: blocks stay inside the range, aligned, disjoint, and the
        // arena's accounting matches a model.
        #[test]
        fn blocks_are_aligned_disjoint_and_accounted(ops in proptest::collection::vec((0usize..3000, 0u32..7, any::<bool>()), 1..200)) {
            let base = 0x1000_0004;
            let mut a = Arena::new(base, 16 * 1024);
            let mut live: Vec<(usize, usize)> = Vec::new();
            for (size, align_log, free) in ops {
                if free && !live.is_empty() {
                    let (addr, sz) = live.remove(size % live.len());
                    prop_assert!(a.free(addr, sz));
                } else if size > 0 {
                    let align = 1usize << align_log;
                    match a.alloc(size, align) {
                        Ok(addr) => {
                            prop_assert_eq!(addr % align, 0);
                            prop_assert!(addr >= base && addr + size <= base + 16 * 1024);
                            for &(b, s) in &live {
                                prop_assert!(addr + size <= b || b + s <= addr, "overlap");
                            }
                            live.push((addr, size));
                        }
                        Err(e) => prop_assert_eq!(e, AllocError::OutOfMemory),
                    }
                }
                prop_assert_eq!(a.live(), live.len());
                prop_assert_eq!(a.allocated(), live.iter().map(|l| l.1).sum::<usize>());
            }
        }
    }
}
