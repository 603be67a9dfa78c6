"""DE-Venus: data-efficient RL with verifiable rewards, on top of verl.

The package follows the data's path:

- ``records``   the Parquet record contract shared by every stage (verl-free)
- ``verify``    answer extraction, equivalence and voting (verl-free)
- ``testbed``   the CPU testbed: synthetic tasks, a tiny model, its warm start
- ``adapters.verl``  the only package that imports verl
"""

__version__ = "0.1.0"
