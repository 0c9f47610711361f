"""``python -m device_plugins``: same as ``vgpu-device-plugin``."""

from device_plugins.cli import main

if __name__ == "__main__":
    main()
