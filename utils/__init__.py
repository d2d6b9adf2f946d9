"""The course package: helpers each chapter of the book teaches first, then reuses."""
