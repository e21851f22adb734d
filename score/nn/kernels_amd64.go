package nn

import "golang.org/x/sys/cpu"

func archInit() {
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		return
	}
	avx2 := &kernels{level: AVX2, softmax: softmaxTileAVX2}
	avx2.swiglu = swiglu32AVX2
	avx2.expSum = expSumAVX2
	avx2.maxFinite = maxFiniteAVX2
	avx2.scaleMax = scaleMaxAVX2
	avx2.sumSquares = sumSquaresAVX2
	avx2.scaleRow = scaleRowAVX2
	avx2.transpose16 = transpose16AVX2
	avx2.quantQ8K = quantQ8KAVX2
	if cpu.X86.HasF16C {
		avx2.roundF16 = roundF16AVX2
		avx2.quantQ80 = quantQ80AVX2
	}
	avx2.dotF32, avx2.dotF32x8 = dotF32W16AVX2, dotF32W8AVX2
	avx2.dotBF16x8 = dotBF16W8AVX2
	avx2.ggmlExpf, avx2.ggmlExpf8 = ggmlExpfW16AVX2, ggmlExpf8AVX2
	avx2.ggmlSoftMax8 = ggmlSoftMax8AVX2
	avx2.libcExpf = libcExpfAVX2
	avx2.tanhCap, avx2.kld = tanhCapAVX2, kldAVX2
	avx2.lanes = [2]lanesFunc{lanesSlices(lanes32AVX2), lanesSlices(lanes16AVX2)}
	avx2.ternary = lanesSlices(ternaryAVX2)
	avx2.q1, avx2.q2 = lanesSlices(q1LanesAVX2), lanesSlices(q2LanesAVX2)
	avx2.pairs = lanesSlices(pairLanesAVX2)
	avx2.minSums = minSumsAVX2
	avx2.laneSums16 = laneSums16AVX2
	avx2.ssmGGML8, avx2.ssmF32 = ssmGGMLAVX2, ssmF32AVX2
	avx2.deltaGGML8 = deltaGGMLAVX2
	avx2.wkv7GGML8 = wkv7AVX2
	avx2.int8 = [4][]int8Func{
		{int8g32m1W256, int8g32m2W256, int8g32m3W256, int8g32m4W256, int8g32m5W256, int8g32m6W256},
		{int8g32minm1W256, int8g32minm2W256, int8g32minm3W256, int8g32minm4W256, int8g32minm5W256, int8g32minm6W256},
		{int8g16m1W256, int8g16m2W256, int8g16m3W256, int8g16m4W256, int8g16m5W256, int8g16m6W256},
		{int8g16minm1W256, int8g16minm2W256, int8g16minm3W256, int8g16minm4W256, int8g16minm5W256, int8g16minm6W256},
	}
	avx2.int8Wide = true
	avx2.tiled = [4][]tiledFunc{
		{tiledSlices(tiled32m1AVX2), tiledSlices(tiled32m2AVX2)},
		{tiledSlices(tiled32minm1AVX2), tiledSlices(tiled32minm2AVX2)},
		{tiledSlices(tiled16m1AVX2), tiledSlices(tiled16m2AVX2)},
		{tiledSlices(tiled16minm1AVX2), tiledSlices(tiled16minm2AVX2)},
	}
	avx2.tiledNarrow = [4][]tiledFunc{
		{tiledSlices(tiled32m1NarrowAVX2), tiledSlices(tiled32m2NarrowAVX2)},
		{tiledSlices(tiled32minm1NarrowAVX2), tiledSlices(tiled32minm2NarrowAVX2)},
		{tiledSlices(tiled16m1NarrowAVX2), tiledSlices(tiled16m2NarrowAVX2)},
		{tiledSlices(tiled16minm1NarrowAVX2), tiledSlices(tiled16minm2NarrowAVX2)},
	}
	avx2.kRepacked = [4][]kRepackedFunc{
		{kRepackedSlices(q4k2m1AVX2), kRepackedSlices(q4k2m2AVX2)},
		{kRepackedSlices(q4k8m1AVX2), kRepackedSlices(q4k8m2AVX2)},
		{kRepackedSlices(q2k8m1AVX2), kRepackedSlices(q2k8m2AVX2)},
		{kRepackedSlices(q2k16m1AVX2), kRepackedSlices(q2k16m2AVX2)},
	}

	avx2.gemm[0] = []gemmFunc{gemmF32x16m1AVX2, gemmF32x16m2AVX2, gemmF32x16m3AVX2, gemmF32x16m4AVX2}
	avx2.gemm[1] = []gemmFunc{gemmF32x32m1AVX2, gemmF32x32m2AVX2}
	avx2.gemmAcc[0] = []gemmFunc{gemmAccF32x16m1AVX2, gemmAccF32x16m2AVX2, gemmAccF32x16m3AVX2, gemmAccF32x16m4AVX2}
	avx2.gemmAcc[1] = []gemmFunc{gemmAccF32x32m1AVX2, gemmAccF32x32m2AVX2}
	levelKernels[AVX2] = avx2
	maxLevel = AVX2
	if !(cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512DQ && cpu.X86.HasAVX512VL) {
		return
	}
	avx512 := &kernels{level: AVX512}
	avx512.int8 = [4][]int8Func{
		{int8g32m1W512, int8g32m2W512, int8g32m3W512, int8g32m4W512, int8g32m5W512, int8g32m6W512},
		{int8g32minm1W512, int8g32minm2W512, int8g32minm3W512, int8g32minm4W512, int8g32minm5W512, int8g32minm6W512},
		{int8g16m1W512, int8g16m2W512, int8g16m3W512, int8g16m4W512, int8g16m5W512, int8g16m6W512},
		{int8g16minm1W512, int8g16minm2W512, int8g16minm3W512, int8g16minm4W512, int8g16minm5W512, int8g16minm6W512},
	}
	avx512.int8Wide = true

	avx512.gemm[0] = []gemmFunc{gemmF32x16m1, gemmF32x16m2, gemmF32x16m3, gemmF32x16m4, gemmF32x16m5, gemmF32x16m6,
		gemmF32x16m7, gemmF32x16m8, gemmF32x16m9, gemmF32x16m10, gemmF32x16m11, gemmF32x16m12}
	avx512.gemm[1] = []gemmFunc{gemmF32x32m1, gemmF32x32m2, gemmF32x32m3, gemmF32x32m4, gemmF32x32m5, gemmF32x32m6,
		gemmF32x32m7, gemmF32x32m8, gemmF32x32m9, gemmF32x32m10, gemmF32x32m11, gemmF32x32m12}
	avx512.gemmAcc[0] = []gemmFunc{gemmAccF32x16m1, gemmAccF32x16m2, gemmAccF32x16m3, gemmAccF32x16m4, gemmAccF32x16m5, gemmAccF32x16m6,
		gemmAccF32x16m7, gemmAccF32x16m8, gemmAccF32x16m9, gemmAccF32x16m10, gemmAccF32x16m11, gemmAccF32x16m12}
	avx512.gemmAcc[1] = []gemmFunc{gemmAccF32x32m1, gemmAccF32x32m2, gemmAccF32x32m3, gemmAccF32x32m4, gemmAccF32x32m5, gemmAccF32x32m6,
		gemmAccF32x32m7, gemmAccF32x32m8, gemmAccF32x32m9, gemmAccF32x32m10, gemmAccF32x32m11, gemmAccF32x32m12}
	avx512.softmax = softmaxTileAVX512
	avx512.transpose16 = transpose16AVX512
	avx512.swiglu = swiglu32AVX512
	avx512.expSum = expSumAVX512
	avx512.sumSquares = sumSquaresAVX512
	avx512.maxFinite = maxFiniteAVX512
	avx512.scaleMax = scaleMaxAVX512
	avx512.scaleRow = scaleRowAVX512
	avx512.quantQ80 = quantQ80AVX512
	avx512.quantQ8K = quantQ8KAVX512
	avx512.roundF16 = roundF16AVX512
	avx512.ggmlExpf = ggmlExpfAVX512
	avx512.ggmlSoftMax, avx512.ggmlSoftMax8 = ggmlSoftMaxAVX512, ggmlSoftMax8AVX2
	avx512.libcExpf = libcExpfAVX512
	avx512.tanhCap, avx512.kld = tanhCapAVX512, kldAVX512
	avx512.ggmlExpf8 = ggmlExpf8AVX2
	avx512.dotF32 = dotF32AVX512
	avx512.dotLanes16 = [4]func(w, x *float32, ldx, n int, out *float32){dotLanes16m1AVX512, dotLanes16m2AVX512, dotLanes16m3AVX512, dotLanes16m4AVX512}
	avx512.dotF32x8 = avx2.dotF32x8
	avx512.dotF16 = [4]func(w, x *float32, ldx, n int, out *float64){dotF16m1AVX512, dotF16m2AVX512, dotF16m3AVX512, dotF16m4AVX512}
	avx512.dotBF16 = [4]func(w, x *float32, ldx, n int, out *float64){dotBF16m1AVX512, dotBF16m2AVX512, dotBF16m3AVX512, dotBF16m4AVX512}
	avx512.dotBF16x8 = avx2.dotBF16x8
	avx512.lanes, avx512.minSums, avx512.ternary = avx2.lanes, avx2.minSums, avx2.ternary
	avx512.laneSums16 = laneSums16AVX512
	avx512.q1, avx512.q2, avx512.pairs = avx2.q1, avx2.q2, avx2.pairs
	avx512.tiled, avx512.tiledNarrow, avx512.kRepacked = avx2.tiled, avx2.tiledNarrow, avx2.kRepacked
	avx512.ssmGGML, avx512.ssmGGML8, avx512.ssmF32 = ssmGGMLAVX512, ssmGGMLAVX2, ssmF32AVX512
	avx512.deltaGGML, avx512.deltaGGML8 = deltaGGMLAVX512, deltaGGMLAVX2
	avx512.wkv7GGML, avx512.wkv7GGML8, avx512.wkv6 = wkv7AVX512, wkv7AVX2, wkv6AVX512
	levelKernels[AVX512] = avx512
	maxLevel = AVX512
	if cpu.X86.HasAVX512VNNI {
		vnni := *avx512
		vnni.level = AVX512VNNI
		vnni.int8Wide = false
		vnni.lanes = [2]lanesFunc{lanes32VNNI, lanes16VNNI}
		vnni.ternary = ternaryVNNI
		vnni.q1, vnni.q2 = lanesHalves(q1LanesVNNI), lanesHalves(q2LanesVNNI)
		vnni.tiledNarrow = [4][]tiledFunc{} // VPDPBUSD takes every weight
		vnni.tiled = [4][]tiledFunc{
			{tiled32m1VNNI, tiled32m2VNNI, tiled32m3VNNI, tiled32m4VNNI},
			{tiled32minm1VNNI, tiled32minm2VNNI},
			{tiled16m1VNNI, tiled16m2VNNI, tiled16m3VNNI, tiled16m4VNNI},
			{tiled16minm1VNNI, tiled16minm2VNNI},
		}
		vnni.tiledAMX = [4][]tiledFunc{
			{tiled32m1AMXVNNI, tiled32m2AMXVNNI, tiled32m3AMXVNNI, tiled32m4AMXVNNI},
			{tiled32minm1AMXVNNI, tiled32minm2AMXVNNI},
			{tiled16m1AMXVNNI, tiled16m2AMXVNNI, tiled16m3AMXVNNI, tiled16m4AMXVNNI},
			{tiled16minm1AMXVNNI, tiled16minm2AMXVNNI},
		}
		vnni.kRepacked = [4][]kRepackedFunc{
			{q4k2m1VNNI, q4k2m2VNNI}, {q4k8m1VNNI, q4k8m2VNNI},
			{q2k8m1VNNI, q2k8m2VNNI}, {q2k16m1VNNI, q2k16m2VNNI},
		}
		vnni.int8 = [4][]int8Func{
			{int8g32m1VNNI, int8g32m2VNNI, int8g32m3VNNI, int8g32m4VNNI, int8g32m5VNNI, int8g32m6VNNI},
			{int8g32minm1VNNI, int8g32minm2VNNI, int8g32minm3VNNI, int8g32minm4VNNI, int8g32minm5VNNI, int8g32minm6VNNI},
			{int8g16m1VNNI, int8g16m2VNNI, int8g16m3VNNI, int8g16m4VNNI, int8g16m5VNNI, int8g16m6VNNI},
			{int8g16minm1VNNI, int8g16minm2VNNI, int8g16minm3VNNI, int8g16minm4VNNI, int8g16minm5VNNI, int8g16minm6VNNI},
		}
		if cpu.X86.HasAVX512BF16 { // every CPU with it has VNNI too
			vnni.dotBF16Raw = [4]func(w, x *uint16, ldx, n int, out *float64){dotBF16Rawm1AVX512, dotBF16Rawm2AVX512, dotBF16Rawm3AVX512, dotBF16Rawm4AVX512}
		}
		levelKernels[AVX512VNNI] = &vnni
		maxLevel = AVX512VNNI
	}
}
