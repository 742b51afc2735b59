"""A password hasher for the test process: PBKDF2 with one iteration (a real hash costs ~0.5 s on 2 cores, and the
login tests hash dozens). Its hashes carry the standard "pbkdf2_sha256" name and their iteration count, so the
servers the tests start, which keep the product's hashers, verify them too."""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class OneIterationPBKDF2(PBKDF2PasswordHasher):
    iterations = 1
