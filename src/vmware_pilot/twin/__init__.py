"""The twin of an inventory: captures of a vCenter in the format govmomi's simulator loads, a
simulator started from one on loopback, and the rehearsal of a gate's released steps on it through
the real companion skills (issue 24)."""
