"""The in-memory backend: numpy and scipy.sparse designs solved by the C++ core.

One module per model: :mod:`.scalar` (every scalar-eta loss, primal and dual routes),
:mod:`.multinomial` (K outputs per sample), :mod:`.multitarget` (several squared-loss
targets sharing one decomposition of X).
"""
