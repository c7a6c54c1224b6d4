"""``llmtop tune``: which settings of one engine serve a traffic best, found by measuring.

The bake-off run over one engine's settings (docs/tune.md): ``space`` reads the plan and
expands the settings, ``boundary`` finds each trial's SLA boundary on one warm server,
``limiter`` names what limited it from the engine's own metrics, ``rules`` prune the search
with that, ``state`` keeps finished trials for a resume, ``search`` runs it all and
``summary`` ranks the answer. Never imports textual or rich.
"""
