#!/usr/bin/python3
"""Writes the seeds of fuzz_sp_model: three small SentencePiece models (BPE, BPE with
byte fallback, unigram; identity normalization, a user-defined symbol), serialized by
python3-sentencepiece's own protobuf module (needs python3-protobuf).
    make_sp_seeds.py OUTDIR"""
import sys

from sentencepiece import sentencepiece_model_pb2 as pb

out = sys.argv[1]
for name, model_type, byte_fallback in [("bpe", 2, False), ("bpe-bytes", 2, True), ("unigram", 1, False)]:
    m = pb.ModelProto()
    for piece, score, type_ in [("<unk>", 0, 2), ("<s>", 0, 3), ("</s>", 0, 3), ("\u2581", -1, 1),
                                ("a", -1, 1), ("b", -1, 1), ("ab", -2, 1), ("\u2581a", -3, 1),
                                ("\u2581ab", -4, 1), ("<x>", 0, 4)]:
        p = m.pieces.add()
        p.piece, p.score, p.type = piece, score, type_
    if byte_fallback:
        for b in range(256):
            p = m.pieces.add()
            p.piece, p.type = "<0x%02X>" % b, 6
    m.trainer_spec.model_type = model_type
    m.trainer_spec.byte_fallback = byte_fallback
    m.normalizer_spec.name = "identity"
    m.normalizer_spec.remove_extra_whitespaces = False
    with open(f"{out}/{name}.model", "wb") as f:
        f.write(m.SerializeToString())
