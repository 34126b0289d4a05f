/* examples/seed003/tile_size.h — the seed's tile: 128 rows x 512 columns
 * (nl.arange(128)[:, None], nl.arange(512)[None, :]). Two float32 tiles
 * take 512 KiB of the core's TCM. Shared by the kernel and the shape
 * function, which sizes the grid in tiles. */
#ifndef SEED003_TILE_SIZE_H
#define SEED003_TILE_SIZE_H
#define TILE_ROWS 128
#define TILE_COLS 512
#endif
