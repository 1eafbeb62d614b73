"""DWARF sections given as bytes (decoded from PTX ``.bN`` data), read with pyelftools.

Shared by the renamer (``rename_dwarf``) and the independent rename check (``rename_check``): only this
adapter to pyelftools is common to both, never the renaming itself.
"""

from __future__ import annotations

import io

_ABSENT = ("debug_aranges_sec", "debug_frame_sec", "eh_frame_sec", "debug_loc_sec", "debug_ranges_sec",
           "debug_line_sec", "debug_pubtypes_sec", "debug_pubnames_sec", "debug_addr_sec", "debug_str_offsets_sec",
           "debug_line_str_sec", "debug_loclists_sec", "debug_rnglists_sec", "debug_sup_sec", "gnu_debugaltlink_sec",
           "debug_types_sec")


def dwarf_info(info: bytes, abbrev: bytes, strs: bytes | None = None):
    """A pyelftools DWARFInfo over raw ``.debug_info``/``.debug_abbrev`` (and ``.debug_str``) bytes."""
    from elftools.dwarf.dwarfinfo import DebugSectionDescriptor, DwarfConfig, DWARFInfo

    def sec(name: str, data: bytes | None):
        return None if data is None else DebugSectionDescriptor(io.BytesIO(data), name, None, len(data), 0)

    return DWARFInfo(DwarfConfig(little_endian=True, machine_arch="nvptx", default_address_size=8),
                     debug_info_sec=sec(".debug_info", info), debug_abbrev_sec=sec(".debug_abbrev", abbrev),
                     debug_str_sec=sec(".debug_str", strs), **dict.fromkeys(_ABSENT))


def is_decode_error(exc: BaseException) -> bool:
    """Did pyelftools (or the construct library under it) fail on malformed DWARF bytes?"""
    from elftools.common.exceptions import DWARFError, ELFParseError

    if isinstance(exc, (DWARFError, ELFParseError, KeyError, ValueError, IndexError, EOFError)):
        return True
    return type(exc).__module__.startswith(("construct", "elftools"))
