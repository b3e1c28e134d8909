"""skewgroup: skew-proof keyed grouping for Spark Structured Streaming.

The routing core (``partitioner``) spreads a stream's keys over n workers with a load-balancing
strategy from the papers; ``skewgroup.spark`` (imported separately, it needs pyspark) uses it to
aggregate a DataFrame by key with the hot keys spread out.
"""
from skewgroup._config import STRATEGIES
from skewgroup._keys import hash_keys
from skewgroup import streams
from skewgroup._partitioner import Partitioner, partitioner, state_bound

__version__ = "0.1.0"

__all__ = ["Partitioner", "STRATEGIES", "hash_keys", "partitioner", "state_bound", "streams", "__version__"]
