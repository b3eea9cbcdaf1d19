"""Execution: deciding a run's next action (``conductor``), carrying it out (``runner``), gates
(``gate_records``, ``approval``), undoing (``undo``), run leases and continuing a dead Pilot's runs
(``runlease``, ``sweeper``)."""
