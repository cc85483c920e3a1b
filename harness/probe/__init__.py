"""``crashlab probe``: learn what a service really does with a key, by a bounded plan of requests."""
