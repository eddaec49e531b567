"""The wire: one schema module (schema.py), one opcode list (opcodes.py), one codec (codec.py)."""
