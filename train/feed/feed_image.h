/* feed_image.h — the image feeds (train/feed/feed_image.c):
 *   flat       Fashion-MNIST as [B, 784] f32 and labels i32 [B], batched on
 *              the host, for the MLP;
 *   loader     an ImageSource through the threaded loader (data/loader.h),
 *              NHWC f32 [B, S, S, 3] and labels i32 [B]: Fashion-MNIST
 *              resized to RGB (S 32 by default; f32 rows copied in) or an
 *              ImageFolder (root, or root/train + root/val; S 224 by
 *              default), decoded as --decode says (feed_decode.h): on the
 *              CPU into u8 rows normalised on the device (on the host for a
 *              CPU context), or by nvJPEG on the device (feed_jpeg.h);
 *              Feed.stats counts images, the wait for data and the
 *              decoder's busy time;
 *   synthetic  random images in [-1, 1) and labels generated once on the
 *              device (S 224, 1000 classes by default).
 * dir NULL: Fashion-MNIST's default location (data/fashion_mnist.h).
 */
#ifndef CTRAIN_TRAIN_FEED_IMAGE_H
#define CTRAIN_TRAIN_FEED_IMAGE_H

#include "feed_types.h"

void feed_flat_open(Feed *f, Ctx *c, const FeedSpec *spec, const char *dir);
void feed_fmnist_images_open(Feed *f, Ctx *c, const FeedSpec *spec, const char *dir);
/* Fatal with a hint when root is not a folder. */
void feed_imagefolder_open(Feed *f, Ctx *c, const FeedSpec *spec, const char *root);
void feed_synthetic_images_open(Feed *f, Ctx *c, const FeedSpec *spec);

#endif
