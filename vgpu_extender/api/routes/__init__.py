"""One router per resource; ``app.py`` only includes them."""
