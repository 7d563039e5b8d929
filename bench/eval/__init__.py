"""Quality through the real RPCs: the SciFact (BEIR) evaluation with its
train-split fits (BM25 boosts, a fine-tuned embedding model) and the Haystack
peer's scores, and the bilingual identifier / Chinese evaluation."""
