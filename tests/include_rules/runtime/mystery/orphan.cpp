// In a folder the rules do not name.
