"""Engine descriptions, their commands and capabilities, and black-box adapters."""
