"""Code every service uses: settings, server bootstrap, errors, stores, embedding."""
