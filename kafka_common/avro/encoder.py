class Encoder:
    pass
