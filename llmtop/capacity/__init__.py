"""Capacity profiles: what a probe, bake-off or tuner measured an engine to hold, saved in
the state folder, matched to live rows, with the shape drift beside the number
(``docs/capacity.md``). Reads and writes files; no UI library."""

from __future__ import annotations

from llmtop.capacity.annotate import annotate_rows, annotate_totals
from llmtop.capacity.profile import (
    Profile,
    load_profile_file,
    load_profiles,
    profile_dir,
    profile_from_report,
    profiles_from_bakeoff,
    profiles_from_json,
    save_profile,
)

__all__ = ["Profile", "annotate_rows", "annotate_totals", "load_profile_file", "load_profiles",
           "profile_dir", "profile_from_report", "profiles_from_bakeoff", "profiles_from_json",
           "save_profile"]
