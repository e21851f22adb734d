// Generated from score/nn/libm.go (nn.LibmData) by go generate: do not edit.
// glibc's expf and logf data (ARM's optimized routines) for libm.cuh.
#pragma once

// __exp2f_data.tab (N = 32): the bits of 2^(i/32) minus i << 47.
__constant__ u64 exp2f_tab[32] = {
    0x3ff0000000000000ull, 0x3fefd9b0d3158574ull, 0x3fefb5586cf9890full, 0x3fef9301d0125b51ull,
    0x3fef72b83c7d517bull, 0x3fef54873168b9aaull, 0x3fef387a6e756238ull, 0x3fef1e9df51fdee1ull,
    0x3fef06fe0a31b715ull, 0x3feef1a7373aa9cbull, 0x3feedea64c123422ull, 0x3feece086061892dull,
    0x3feebfdad5362a27ull, 0x3feeb42b569d4f82ull, 0x3feeab07dd485429ull, 0x3feea47eb03a5585ull,
    0x3feea09e667f3bcdull, 0x3fee9f75e8ec5f74ull, 0x3feea11473eb0187ull, 0x3feea589994cce13ull,
    0x3feeace5422aa0dbull, 0x3feeb737b0cdc5e5ull, 0x3feec49182a3f090ull, 0x3feed503b23e255dull,
    0x3feee89f995ad3adull, 0x3feeff76f2fb5e47ull, 0x3fef199bdd85529cull, 0x3fef3720dcef9069ull,
    0x3fef5818dcfba487ull, 0x3fef7c97337b9b5full, 0x3fefa4afa2a490daull, 0x3fefd0765b6e4540ull,
};

// __logf_data.tab: per subinterval of [0x3f330000, 2·0x3f330000) 1/c and
// log(c).
__constant__ double logf_tab[16][2] = {
    {0x1.661ec79f8f3bep+00, -0x1.57bf7808caadep-02},
    {0x1.571ed4aaf883dp+00, -0x1.2bef0a7c06ddbp-02},
    {0x1.49539f0f010bp+00, -0x1.01eae7f513a67p-02},
    {0x1.3c995b0b80385p+00, -0x1.b31d8a68224e9p-03},
    {0x1.30d190c8864a5p+00, -0x1.6574f0ac07758p-03},
    {0x1.25e227b0b8eap+00, -0x1.1aa2bc79c81p-03},
    {0x1.1bb4a4a1a343fp+00, -0x1.a4e76ce8c0e5ep-04},
    {0x1.12358f08ae5bap+00, -0x1.1973c5a611cccp-04},
    {0x1.0953f419900a7p+00, -0x1.252f438e10c1ep-05},
    {0x1p+00, 0x0p+00},
    {0x1.e608cfd9a47acp-01, 0x1.aa5aa5df25984p-05},
    {0x1.ca4b31f026aap-01, 0x1.c5e53aa362eb4p-04},
    {0x1.b2036576afce6p-01, 0x1.526e57720db08p-03},
    {0x1.9c2d163a1aa2dp-01, 0x1.bc2860d22477p-03},
    {0x1.886e6037841edp-01, 0x1.1058bc8a07ee1p-02},
    {0x1.767dcf5534862p-01, 0x1.4043057b6ee09p-02},
};

// __logf_data.poly: the log1p polynomial's coefficients past the first.
__constant__ double logf_poly[3] = {-0x1.00ea348b88334p-02, 0x1.5575b0be00b6ap-02, -0x1.ffffef20a4123p-02};
