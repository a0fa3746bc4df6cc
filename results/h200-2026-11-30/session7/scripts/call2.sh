#!/bin/bash
# session 7, call 2 (nvidia-h200-x2): the bench half of the matrix
OUT=$OUT bash scripts/h200x2_dist_matrix.sh bench
