#!/bin/bash
# session 7, call 1 (nvidia-h200-x2): the tests half of the matrix
OUT=$OUT bash scripts/h200x2_dist_matrix.sh tests
