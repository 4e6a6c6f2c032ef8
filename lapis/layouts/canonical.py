"""Canonical shared-memory layouts of a wgmma / tcgen05 operand tile.

A tensor-core operand in shared memory is an MN x K tile built from *swizzle
atoms* (PTX ISA 9.7.15.5.1.2 "Shared Memory Matrix Layout", Table 38 and the
canonical-layout table 9.7.15.5.1.2.1.3; the same table is in the tcgen05
section 9.7.16.3). Units used throughout this module:

- elements: logical coordinates (mn, k) and the strides of `cute()`, `.layout`, `ptx_layout` and
  `to_tensor_layouts()`;
- bytes: `offset_bytes`, `address`, `atom_bytes`, `lbo_bytes`, `sbo_bytes`;
- 16-B units appear only in the descriptor encoding (see lapis.layouts.descriptors.sm90).

Let e = element bytes, T = 16 / e (elements per 16 B, PTX's T) and
S = the swizzle span in bytes (128, 64, 32; 16 for no swizzle). Then

- K-major atom: 8 MN rows x S bytes of K, i.e. (8, S/e) elements; a row of
  S bytes is contiguous, rows are S bytes apart.
- MN-major atom: S bytes of MN x 8 K rows, i.e. (S/e, 8) elements; each K row
  holds S/e contiguous MN elements, K rows are S bytes apart.
- Without swizzle the atom is one *core matrix*: 8 rows x 16 B = 128 B.

Every atom is `atom_bytes` = 8 x S contiguous bytes (1024/512/256/128 B).
Atoms are stacked densely, either MN first ('mn-first') or K first
('k-first'). The defaults follow how CUTLASS's sm90/sm100 mainloops tile the
atoms with `tile_to_shape(..., Step<_1,_2,_3>)` for K-major and
`Step<_2,_1,_3>` for MN-major (e.g. `sm90_mma_tma_gmma_ss_warpspecialized.hpp`).

The swizzle acts on the absolute shared-memory byte address (PTX ISA 5.5.7;
CUTLASS `pointer_swizzle.hpp`: the hardware swizzle is position dependent), so
`address()` takes the tile base and XORs the absolute address.

The layout algebra is tensor-layouts': `.layout` is its tile_to_shape of CUTLASS's atom, offsets are its
evaluation of that layout, the XOR is its Swizzle, and layouts are compared by its coalesce. Two spellings of
the same map are printed: `cute()`, as C++ CuTe prints the tile_to_shape layout, and `ptx_text()`, PTX's
core-matrix form (the canonical-layout table).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
from tensor_layouts import ComposedLayout, Layout, Swizzle, coalesce, mode, product_each, size
from tensor_layouts.layout_utils import tile_to_shape

from lapis.catalog.hardware import SMEM_BYTES_PER_SM
from lapis.errors import LayoutError
from lapis.layouts.dtypes import DType
from lapis.layouts.dtypes import dtype as _dtype
from lapis.layouts.swizzle import B128_BASE32B, SwizzleMode
from lapis.layouts.swizzle import swizzle as _swizzle

__all__ = ["CanonicalLayout", "canonical_layout", "MAJORS", "ORDERS", "SMEM_SWIZZLES", "library_swizzle",
           "same_function", "mode_offsets", "cute_text"]


def _layout_swizzle(name):
    """Swizzle spellings of canonical layouts: none, 32B, 64B, 128B, and tcgen05's 128B_base32B."""
    return B128_BASE32B if name in ("128B_base32B", B128_BASE32B) else _swizzle(name)


# CuTe Swizzle<B,M,S> on byte addresses -> lapis swizzle name (cute/atom/mma_traits_sm90_gmma.hpp *_Atom_Bits,
# cute/atom/mma_traits_sm100.hpp Layout_MN_SW128_32B_Atom_Bits).
SMEM_SWIZZLES = {(0, 4, 3): "none", (1, 4, 3): "32B", (2, 4, 3): "64B", (3, 4, 3): "128B", (2, 5, 2): "128B_base32B"}


def library_swizzle(sw: SwizzleMode, elem_bytes: int = 1) -> Swizzle:
    """The tensor-layouts Swizzle of a swizzle mode: on byte addresses for elem_bytes=1, else on element offsets.

    The element form is CuTe's recast_layout<uint8_t, T> of the byte swizzle (cute/pointer_flagged.hpp,
    as_position_independent_swizzle_layout): Swizzle<B, M - log2(e), S>, e.g. Swizzle<3,3,3> for 128B on 2-byte
    elements. Both act on offsets from a base aligned to the swizzle repeat; the byte form on absolute addresses.
    """
    return Swizzle(sw.bits, sw.base - (int(elem_bytes).bit_length() - 1), sw.shift)


def mode_offsets(layout: Layout) -> tuple[np.ndarray, np.ndarray]:
    """Offsets of every index of mode 0 and of mode 1 of a rank-2 layout, each evaluated by tensor-layouts.

    A layout maps (i, j) to mode0(i) + mode1(j) (the inner product of the coordinate with the strides, CuTe's
    crd2idx), so the two tables give the offset of every element: t0[:, None] + t1[None, :].
    """
    tables = []
    for m in (mode(layout, 0), mode(layout, 1)):
        tables.append(np.fromiter((m(i) for i in range(size(m))), dtype=np.int64, count=size(m)))
    return tables[0], tables[1]


def same_function(a: Layout, b: Layout) -> bool:
    """Do two rank-2 layouts of the same mode sizes map every coordinate to the same offset?

    Each mode is coalesced on its own (tensor-layouts coalesce with a None profile: size-1 modes dropped,
    contiguous ones merged, as CuTe's bw_coalesce). A coalesced mode is the one flat form of its function, and a
    rank-2 layout is the sum of its modes' functions, so equal coalesced modes mean the same map.
    """
    return (product_each(a.shape) == product_each(b.shape)
            and coalesce(a, (None, None)) == coalesce(b, (None, None)))


def cute_text(x, static: bool = True) -> str:
    """A shape or stride as C++ CuTe prints it: `(_8,_16)`, no spaces, `_` before static integers
    (cute/container/tuple.hpp print(tuple), cute/numeric/integral_constant.hpp print(C<v>))."""
    if isinstance(x, tuple):
        return "(" + ",".join(cute_text(v, static) for v in x) + ")"
    return f"_{x}" if static else str(x)


def _cute_unit_strides(layout: Layout) -> Layout:
    """The layout with every size-1 mode's stride written 0, as C++ CuTe has it after tile_to_shape.

    C++'s make_ordered_layout (compact_order) gives a static _1 mode the stride _0, so the tiler's single-atom
    modes print as `_1` with stride `_0`; tensor-layouts and pycute keep the stride the mode would have had. The
    map is the same either way.
    """
    def fix(shape, stride):
        if isinstance(shape, tuple):
            return tuple(fix(s, d) for s, d in zip(shape, stride))
        return 0 if shape == 1 else stride
    return Layout(layout.shape, fix(layout.shape, layout.stride))


MAJORS = ("K", "MN")
ORDERS = ("mn-first", "k-first")
_DEFAULT_ORDER = {"K": "mn-first", "MN": "k-first"}
_SRC = "PTX ISA 9.7.15.5.1.2"
SMEM_BYTES = SMEM_BYTES_PER_SM


# ---------------------------------------------------------------------------
# The layout
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class CanonicalLayout:
    """A canonical wgmma operand layout for an MN x K tile (PTX ISA 9.7.15.5.1.2).

    major: 'K' (K contiguous inside an atom row) or 'MN'.
    swizzle: 'none', '32B', '64B', '128B' or a SwizzleMode.
    dtype: element type name or DType (8, 16 or 32 bit).
    rows: MN extent in elements; cols: K extent in elements.
    order: how atoms are stacked, 'mn-first' or 'k-first'; None picks the
    CUTLASS default ('mn-first' for K-major, 'k-first' for MN-major).
    """

    major: str
    swizzle: SwizzleMode
    dtype: DType
    rows: int
    cols: int
    order: str | None = None

    def __post_init__(self):
        major = str(self.major).upper() if isinstance(self.major, str) else self.major
        if major not in MAJORS:
            raise LayoutError("canonical layout: unknown major-ness", repr(self.major), "use 'K' or 'MN'", _SRC)
        order = _DEFAULT_ORDER[major] if self.order is None else self.order
        if order not in ORDERS:
            raise LayoutError("canonical layout: unknown atom order", repr(self.order),
                              "use 'mn-first', 'k-first' or None for the CUTLASS default")
        dt = _dtype(self.dtype)
        if dt.bits % 8 or not 8 <= dt.bits <= 128:
            raise LayoutError("canonical layout: element size must be 1..16 whole bytes", f"{dt.name} ({dt.bits} bit)",
                              "use an 8, 16 or 32-bit element type", _SRC)
        object.__setattr__(self, "major", major)
        object.__setattr__(self, "order", order)
        object.__setattr__(self, "swizzle", _layout_swizzle(self.swizzle))
        if self.swizzle.name == "128B_base32B" and major != "MN":
            raise LayoutError("canonical layout: 128B with 32 B atomicity exists only MN-major (tcgen05)",
                              f"{major}-major", "use MN-major, or the 128B swizzle for K-major",
                              "PTX ISA tcgen05 canonical layouts; CUTLASS make_umma_desc")
        object.__setattr__(self, "dtype", dt)
        self._check_extent("rows (MN extent)", self.rows, self.atom_shape[0])
        self._check_extent("cols (K extent)", self.cols, self.atom_shape[1])
        object.__setattr__(self, "rows", int(self.rows))  # numpy ints would overflow in the byte maths
        object.__setattr__(self, "cols", int(self.cols))
        if self.footprint_bytes > SMEM_BYTES:
            raise LayoutError("canonical layout: the tile must fit one SM's 228 KiB of shared memory",
                              f"{self.rows} x {self.cols} {self.dtype.name} = {self.footprint_bytes} B",
                              "tile the operand into smaller stages", "CUDA C++ Programming Guide, cc 9.0/10.0")

    def _check_extent(self, what: str, value, atom: int) -> None:
        # The tile must be a whole number of swizzle atoms in each direction.
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value <= 0 or value % atom:
            raise LayoutError(
                f"canonical layout: {what} must be a positive multiple of the "
                f"{self.major}-major {self.swizzle.name} atom extent {atom} ({self.dtype.name})",
                repr(value), f"round it up to a multiple of {atom}", _SRC + " Table 38")

    # -- atom geometry ------------------------------------------------------

    @property
    def elem_bytes(self) -> int:
        return self.dtype.bytes

    @property
    def span_elems(self) -> int:
        """Elements per swizzled row (S / e); T for no swizzle."""
        return self.swizzle.span_bytes // self.elem_bytes

    @property
    def atom_shape(self) -> tuple[int, int]:
        """(mn, k) extent of one swizzle atom, in elements (PTX Table 38 x T)."""
        if self.major == "K":
            return (self.swizzle.rows, self.span_elems)
        return (self.span_elems, self.swizzle.rows)

    @property
    def atom_bytes(self) -> int:
        """Bytes of one atom = 8 rows x span = the swizzle repeat (128 B for none)."""
        return self.swizzle.rows * self.swizzle.span_bytes

    @property
    def atoms(self) -> tuple[int, int]:
        """Number of atoms along (MN, K)."""
        return (self.rows // self.atom_shape[0], self.cols // self.atom_shape[1])

    @property
    def footprint_bytes(self) -> int:
        """Bytes the tile occupies: the atoms are dense, so rows x cols x e."""
        return self.rows * self.cols * self.elem_bytes

    # -- atom strides -------------------------------------------------------

    @property
    def mn_atom_stride_bytes(self) -> int:
        """Bytes between MN-adjacent atoms."""
        _, ak = self.atoms
        return self.atom_bytes if self.order == "mn-first" else ak * self.atom_bytes

    @property
    def k_atom_stride_bytes(self) -> int:
        """Bytes between K-adjacent atoms."""
        am, _ = self.atoms
        return am * self.atom_bytes if self.order == "mn-first" else self.atom_bytes

    # -- LBO / SBO with PTX's roles (PTX ISA 9.7.15.5.1.2.1.1 and .2) --------

    @property
    def lbo_bytes(self) -> int | None:
        """Leading dimension byte offset, or None where PTX says it is unused.

        K-major none: K distance between core matrices. K-major swizzled: unused
        (the K mode never leaves one atom row; the descriptor field is then
        written as 1, CUTLASS's convention). MN-major none: K distance between
        8-row groups. MN-major swizzled: MN distance between atoms.
        """
        if self.major == "K":
            return self.k_atom_stride_bytes if self.swizzle.bits == 0 else None
        return self.k_atom_stride_bytes if self.swizzle.bits == 0 else self.mn_atom_stride_bytes

    @property
    def sbo_bytes(self) -> int:
        """Stride dimension byte offset.

        K-major: MN distance between 8-row groups. MN-major none: MN distance
        between T-element (16 B) groups. MN-major swizzled: K distance between
        8-row groups. Note the LBO/SBO swap for MN-major between interleave and
        swizzled modes (also in CUTLASS `make_gmma_desc`).
        """
        if self.major == "K" or self.swizzle.bits == 0:
            return self.mn_atom_stride_bytes
        return self.k_atom_stride_bytes

    # -- CuTe view ----------------------------------------------------------

    @property
    def atom_layout(self) -> Layout:
        """The swizzle atom as CUTLASS defines it, pre-swizzle, in elements.

        GMMA::Layout_{K,MN}_{INTER,SW32,SW64,SW128}_Atom<T> (cute/atom/mma_traits_sm90_gmma.hpp) and
        UMMA::Layout_MN_SW128_32B_Atom<T> (cute/atom/mma_traits_sm100.hpp) are written in bits and upcast to
        T: K-major (8, S/e):(S/e, 1), MN-major (S/e, 8):(1, S/e); 4 K rows for 128B_base32B.
        """
        rows, width = self.swizzle.rows, self.span_elems
        if self.major == "K":
            return Layout((rows, width), (width, 1))
        return Layout((width, rows), (1, width))

    @property
    def tile_order(self) -> tuple[int, int]:
        """tensor-layouts' tile_to_shape order (the mode tiled first, then the other): CuTe's Step<_1,_2> for
        'mn-first', Step<_2,_1> for 'k-first'."""
        return (0, 1) if self.order == "mn-first" else (1, 0)

    @cached_property
    def layout(self) -> Layout:
        """The tile as CuTe builds it, pre-swizzle: tile_to_shape(atom, (rows, cols), order), in elements.

        (mn, k) -> element offset from the tile start. Built by tensor-layouts' tile_to_shape (a blocked_product
        of the atom over the atom grid, as cute/layout.hpp of CUTLASS 4.2 does); size-1 modes get stride 0 as in C++.
        """
        return _cute_unit_strides(tile_to_shape(self.atom_layout, (self.rows, self.cols), self.tile_order))

    def to_tensor_layouts(self) -> ComposedLayout:
        """The tile with its swizzle as a tensor-layouts ComposedLayout, in elements.

        Swizzle<B, M - log2(e), S> o layout: (mn, k) -> swizzled element offset for a tile whose base is aligned
        to the swizzle repeat, CuTe's as_position_independent_swizzle_layout of the smem_ptr-flagged tile
        (cute/pointer_flagged.hpp). Without swizzle the outer Swizzle has 0 bits (the identity).
        """
        return ComposedLayout(library_swizzle(self.swizzle, self.elem_bytes), self.layout)

    @classmethod
    def from_tensor_layouts(cls, layout: Layout | ComposedLayout, dtype: str | DType) -> "CanonicalLayout":
        """The canonical layout a tensor-layouts layout of `dtype` elements is, swizzle included.

        Takes what to_tensor_layouts gives: a ComposedLayout of a Swizzle on element offsets (Swizzle<B, M -
        log2(e), S>) over a rank-2 Layout, offset 0; or a plain Layout for no swizzle. The majors and atom orders
        are tried in turn (the CUTLASS default order first) and the first with the same map is returned. Raises
        LayoutError if the swizzle is not a canonical smem swizzle or no canonical layout has that map.
        """
        dt = _dtype(dtype)
        shift = dt.bytes.bit_length() - 1
        if isinstance(layout, Layout):
            sw, inner = (0, 4, 3), layout
        elif (isinstance(layout, ComposedLayout) and isinstance(layout.outer, Swizzle)
              and isinstance(layout.inner, Layout) and layout.offset == 0):
            o = layout.outer
            sw, inner = (0, 4, 3) if o.bits == 0 else (o.bits, o.base + shift, o.shift), layout.inner
        else:
            raise LayoutError("canonical layout: expected Swizzle o Layout (offset 0) or a Layout", repr(layout),
                              "pass CanonicalLayout.to_tensor_layouts()'s form: ComposedLayout(Swizzle, Layout)")
        if sw not in SMEM_SWIZZLES:
            raise LayoutError("canonical layout: not a canonical smem swizzle for this element type",
                              f"Swizzle{sw} on bytes ({dt.name})",
                              "use Swizzle<0..3, 4 - log2(e), 3> or tcgen05's Swizzle<2, 5 - log2(e), 2>")
        if not isinstance(inner.shape, tuple) or len(inner.shape) != 2:
            raise LayoutError("canonical layout: a tile has two modes, (MN, K)", str(inner),
                              "give a rank-2 layout (MN, K)")
        rows, cols = product_each(inner.shape)
        for major in MAJORS:
            for order in (_DEFAULT_ORDER[major], *(o for o in ORDERS if o != _DEFAULT_ORDER[major])):
                try:
                    cand = cls(major, SMEM_SWIZZLES[sw], dt, rows, cols, order)
                except LayoutError:
                    continue
                if same_function(inner, cand.layout):
                    return cand
        raise LayoutError("canonical layout: no canonical layout has this map", str(inner),
                          "build it with tile_to_shape(GMMA atom, (MN, K)); PTX ISA 9.7.15.5.1.2")

    def _shape_stride(self):
        """Hierarchical (mn-mode, k-mode) shape and element strides, PTX-table form.

        K-major:  ((8, m), (T, c, k)) : ((S/e, mn_atom/e), (1, T, k_atom/e))
        MN-major: ((T, c, m), (8, k)) : ((1, T, mn_atom/e), (S/e, k_atom/e))
        with c = S / 16 (1 for none). Size-1 modes are kept, so every tile has
        the same mode structure.
        """
        e, t = self.elem_bytes, self.dtype.per_16b
        am, ak = self.atoms
        c = self.swizzle.span_bytes // 16
        mn_atom, k_atom, row = self.mn_atom_stride_bytes // e, self.k_atom_stride_bytes // e, self.span_elems
        rows = self.swizzle.rows
        if self.major == "K":
            return ((rows, am), (t, c, ak)), ((row, mn_atom), (1, t, k_atom))
        return ((t, c, am), (rows, ak)), ((1, t, mn_atom), (row, k_atom))

    @property
    def ptx_layout(self) -> Layout:
        """The same pre-swizzle map in PTX's core-matrix form (elements), see _shape_stride."""
        return Layout(*self._shape_stride())

    def cute(self) -> str:
        """The whole tile as C++ CuTe prints tile_to_shape(atom, shape, order): swizzle (on byte addresses) o
        smem_ptr[Nb](unset) o layout (elements), e.g. `Sw<3,4,3> o smem_ptr[16b](unset) o
        ((_8,_16),(_64,_2)):((_64,_512),(_1,_8192))` (print of ComposedLayout, cute/layout_composed.hpp; of
        smem_ptr_flag_bits, cute/pointer_flagged.hpp; of Swizzle, cute/swizzle.hpp)."""
        lay = self.layout
        return (f"{self.swizzle.cute} o smem_ptr[{self.dtype.bits}b](unset) o "
                f"{cute_text(lay.shape)}:{cute_text(lay.stride)}")

    def ptx_text(self) -> str:
        """The PTX core-matrix form as text, plain integers: `((8,16),(8,8,2)):((64,512),(1,8,8192))`."""
        shape, stride = self._shape_stride()
        return f"{cute_text(shape, static=False)}:{cute_text(stride, static=False)}"

    # -- forward map ----------------------------------------------------------

    @cached_property
    def _offsets(self) -> tuple[np.ndarray, np.ndarray]:
        """Element offsets of every mn and every k (mode_offsets of the tile_to_shape layout)."""
        return mode_offsets(self.layout)

    def offset_bytes(self, mn: int | np.ndarray, k: int | np.ndarray) -> int | np.ndarray:
        """Pre-swizzle byte offset of element (mn, k) from the tile start (vectorized).

        The tile's layout evaluated by tensor-layouts, one table per mode, times the element bytes.
        """
        mn, k = self._coords(mn, k)
        t0, t1 = self._offsets
        out = (t0[mn] + t1[k]) * self.elem_bytes
        return int(out) if np.ndim(out) == 0 else out

    def address(self, mn: int | np.ndarray, k: int | np.ndarray, base: int = 0) -> int | np.ndarray:
        """Absolute smem byte address of element (mn, k) for a tile at `base` (vectorized).

        = swizzle(base + offset_bytes), the tensor-layouts Swizzle on byte addresses: the XOR uses absolute
        address bits, so a tile at 1024*j + 128 is laid out differently from one at 1024*j.
        """
        self._check_base(base)
        out = library_swizzle(self.swizzle)(base + np.asarray(self.offset_bytes(mn, k), dtype=np.int64))
        return int(out) if np.ndim(out) == 0 else out

    # -- inverse map ----------------------------------------------------------

    @cached_property
    def _elements(self) -> tuple[np.ndarray, np.ndarray]:
        """(mn, k) of every element offset: the forward tables inverted by scatter (canonical tiles are dense,
        so each offset in [0, rows * cols) holds exactly one element)."""
        t0, t1 = self._offsets
        off = (t0[:, None] + t1[None, :]).ravel()
        mn, k = np.empty(off.size, np.int64), np.empty(off.size, np.int64)
        mn[off] = np.repeat(np.arange(self.rows), self.cols)
        k[off] = np.tile(np.arange(self.cols), self.rows)
        return mn, k

    def element_at(self, addr: int | np.ndarray, base: int = 0) -> tuple[int, int] | tuple[np.ndarray, np.ndarray]:
        """(mn, k) of the element at absolute smem byte address `addr` (vectorized).

        Un-swizzles with the same XOR (an involution on 16-B chunks, so it keeps element alignment), then looks
        the offset up in the inverted layout. Raises LayoutError for addresses outside the tile or not on an
        element boundary.
        """
        self._check_base(base)
        a = _int_array(addr, "addresses")
        e = self.elem_bytes
        bad = a % e != 0
        if np.any(bad):
            raise LayoutError("canonical layout: address is not on an element boundary",
                              _first_hex(a, bad), f"use a multiple of {e} B ({self.dtype.name})")
        off = np.asarray(library_swizzle(self.swizzle)(a), dtype=np.int64) - base
        bad = (off < 0) | (off >= self.footprint_bytes)
        if np.any(bad):
            raise LayoutError("canonical layout: address is outside the tile", _first_hex(a, bad),
                              f"use an address whose un-swizzled value lies in "
                              f"[{base:#x}, {base + self.footprint_bytes:#x})")
        mn_of, k_of = self._elements
        mn, k = mn_of[off // e], k_of[off // e]
        if np.ndim(mn) == 0:
            return int(mn), int(k)
        return mn, k

    # -- MMA K-steps (CUTLASS GMMA::DescriptorIterator, cute/atom/mma_traits_sm90_gmma.hpp) -----

    def kstep_start(self, step: int, k_per_mma: int | None = None, base: int = 0) -> int:
        """Descriptor start address (bytes, pre-swizzle) of MMA K-step `step`.

        = base + offset_bytes(0, step * k_per_mma); k_per_mma defaults to 32 B
        of K (bf16 16, fp8 32, tf32 8). Inside a 128B K-major atom the steps
        start +32, +64, +96 B in; the hardware applies the XOR itself.
        """
        self._check_base(base)
        kpm = 32 // self.elem_bytes if k_per_mma is None else k_per_mma
        if isinstance(kpm, bool) or not isinstance(kpm, (int, np.integer)) or kpm <= 0:
            raise LayoutError("canonical layout: k_per_mma must be a positive element count", repr(k_per_mma),
                              "pass the MMA's K extent in elements (32 B of K: bf16 16, fp8 32, tf32 8)")
        if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or not 0 <= step * kpm < self.cols:
            raise LayoutError("canonical layout: K-step starts outside the tile", f"step {step!r} x {kpm} elements",
                              f"use 0 <= step < {-(-self.cols // kpm)} for K extent {self.cols}")
        return base + self.offset_bytes(0, step * kpm)

    # -- checks ---------------------------------------------------------------

    def _coords(self, mn, k):
        mn, k = _int_array(mn, "mn"), _int_array(k, "k")
        for name, v, hi in (("mn", mn, self.rows), ("k", k, self.cols)):
            bad = (v < 0) | (v >= hi)
            if np.any(bad):
                raise LayoutError(f"canonical layout: coordinate {name} outside the tile",
                                  int(v[bad].flat[0]) if v.ndim else int(v), f"use 0 <= {name} < {hi}")
        return mn, k

    def _check_base(self, base) -> None:
        if isinstance(base, bool) or not isinstance(base, (int, np.integer)) or base < 0 or base % 16:
            raise LayoutError("canonical layout: tile base address must be a non-negative multiple of 16 B",
                              repr(base) if not isinstance(base, (int, np.integer)) else hex(base),
                              "align the tile base to 16 B (to the swizzle repeat for a base offset of 0)",
                              "PTX ISA 9.7.15.5.1.2.2")
        if int(base) + self.footprint_bytes > SMEM_BYTES:
            raise LayoutError("canonical layout: the tile must end inside the SM's 228 KiB of shared memory",
                              f"base {int(base):#x} + {self.footprint_bytes} B",
                              f"use a base of at most {SMEM_BYTES - self.footprint_bytes:#x}")

    def __str__(self) -> str:
        return (f"{self.major}-major {self.swizzle.name} {self.dtype.name} {self.rows}x{self.cols} "
                f"({self.order}): {self.cute()}")


def canonical_layout(major: str, swizzle: str | SwizzleMode, dtype: str | DType, rows: int, cols: int,
                     order: str | None = None) -> CanonicalLayout:
    """Build a CanonicalLayout (same arguments); the spelling used by the CLI."""
    return CanonicalLayout(major, swizzle, dtype, rows, cols, order)


def _int_array(v, what: str) -> np.ndarray:
    """Integer coordinates or addresses as int64; floats, bools and out-of-range values are errors."""
    a = np.asarray(v)
    if a.dtype.kind not in "iu" or (a.dtype.kind == "u" and a.size and int(a.max()) >= 2**63):
        raise LayoutError(f"canonical layout: {what} must be integers", repr(v) if a.size < 8 else str(a.dtype),
                          f"pass whole numbers (int64) for {what}")
    return a.astype(np.int64)


def _first_hex(a, bad) -> str:
    return hex(int(a[bad].flat[0]) if a.ndim else int(a))
