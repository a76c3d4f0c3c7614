"""The former name of :mod:`subregweigh.io`, kept so that code written against it, such as
``from subregweigh.formats import read_dataset, write_weights``, goes on working."""

from subregweigh.io import *  # noqa: F403
from subregweigh.io import __all__  # noqa: F401
