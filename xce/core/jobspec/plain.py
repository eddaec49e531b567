"""Plain records for the grammars' own values, and the array-size defaults: stdlib only.

``bsub`` and ``sbatch`` run once per job from workflow tools, so each costs what its
imports cost (issue 15's goal: 20 ms).  The options, their merge, what bsub's options
mean and the builder (options.py, bsub.py, slurm.py, directives.py, build.py) therefore
import neither msgspec (its import pulls typing, typing_extensions, inspect, uuid and
decimal: ~40 ms idle, more than the rest of the command) nor typing, nor dataclasses
(which imports inspect).  Their values (an option set, a parsed request, an -env
policy) never go on the wire or into hard state, so they need no Struct: a ``Plain``
subclass declares its fields as annotated class attributes with defaults, as a
dataclass would, and gets ``__init__`` (positional or by keyword), ``==`` and ``repr``;
``frozen=True`` refuses assignment after ``__init__`` and gives a hash.  A dict or list default is
copied for each instance.  What does go on the wire (ArraySpec, the dependency AST) stays
a msgspec Struct in arrays.py and depend.py, imported only by a job that uses them.

docs/benchmarks.md, "The front-ends' start-up", has the measurements.
"""

from __future__ import annotations

LSF_MAX_ARRAY_SIZE = 1000   # LSF's MAX_JOB_ARRAY_SIZE default; arrays.py enforces it
SLURM_MAX_ARRAY_SIZE = 1001  # Slurm's MaxArraySize default
# The largest maximum a site may configure (LSF's MAX_JOB_ARRAY_SIZE range): the doors parse up
# to it, and the leader applies the site's own (controller.max_array_size, size_error).
ARRAY_SIZE_CAP = 2**31 - 2

_REQUIRED = object()


class Plain:
    """A record: fields from the class's annotations, in order; defaults from its attributes."""

    _fields: tuple[str, ...] = ()
    _defaults: dict[str, object] = {}
    _frozen = False

    def __init_subclass__(cls, frozen: bool = False, **kw: object) -> None:
        super().__init_subclass__(**kw)
        cls._fields = tuple(cls.__dict__.get("__annotations__", {}))
        cls._defaults = {f: cls.__dict__.get(f, _REQUIRED) for f in cls._fields}
        cls._frozen = frozen
        if frozen:  # hashable as a tuple of its values is (so a value holding a dict is not)
            cls.__hash__ = Plain._hash  # type: ignore[method-assign]

    def __init__(self, *args: object, **kw: object) -> None:
        if len(args) > len(self._fields):
            raise TypeError(f"{type(self).__name__} takes at most {len(self._fields)} positional arguments")
        given = dict(zip(self._fields, args))
        for name, value in kw.items():
            if name not in self._defaults or name in given:
                raise TypeError(f"{type(self).__name__}: unexpected or repeated argument {name!r}")
            given[name] = value
        for name, default in self._defaults.items():
            value = given.get(name, default)
            if value is _REQUIRED:
                raise TypeError(f"{type(self).__name__}: missing argument {name!r}")
            if name not in given and isinstance(value, (dict, list)):
                value = type(value)(value)  # a fresh copy: instances never share a mutable default
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        if self._frozen:
            raise AttributeError(f"{type(self).__name__} is frozen: cannot set {name!r}")
        object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields)

    __hash__ = None  # type: ignore[assignment]  # a record that can change has no hash

    def _hash(self) -> int:
        return hash((type(self), *(getattr(self, f) for f in self._fields)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._fields)})"
